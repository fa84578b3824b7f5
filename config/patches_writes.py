"""The server patch that sends a write at once: ``eager_writes``
(``config.patches`` lists every patch and applies them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from config.patch_support import missing, unused_by

# --- eager_writes ----------------------------------------------------------------


def check_eager_writes() -> list[str]:
    from twisted.internet import abstract, tcp

    problems = []
    if tcp.Port.transport is not tcp.Server:
        problems.append("twisted.internet.tcp.Port.transport is not tcp.Server")
    problems += missing(
        tcp.Server, "dataBuffer", "offset", "_writeDisconnected", "TLS", "writeSomeData"
    )
    problems += unused_by(abstract.FileDescriptor.__init__, "_tempDataLen")
    return problems


def _eager(base: type) -> type:
    """A Twisted TCP transport that sends a write at once when nothing is
    waiting to be sent before it, as asyncio's transports do.

    Twisted queues every write and sends it from the reactor's next turn:
    two registrations with the event loop (``add_writer``, then
    ``remove_writer``), a turn of the loop and its logging context per
    write, which is per token on a paced stream. Anything not sent at once
    (a full socket buffer, an error) takes Twisted's own path, which also
    handles flow control and connection loss.
    """

    class Eager(base):  # type: ignore[valid-type, misc]
        def write(self, data: bytes) -> None:
            self.writeSequence((data,))

        def writeSequence(self, iovec: Iterable[bytes]) -> None:
            if (
                self.connected
                and not self.TLS
                and not self.disconnecting
                and not self._writeDisconnected
                and not self._tempDataLen
                and self.offset == len(self.dataBuffer)
            ):
                data = b"".join(iovec)
                sent = self.writeSomeData(data)
                if isinstance(sent, int) and sent >= 0:
                    if sent == len(data):
                        return
                    iovec = (data[sent:],)
            super().writeSequence(iovec)

    Eager.__name__ = Eager.__qualname__ = f"Eager{base.__name__}"
    return Eager


def build_eager_writes() -> list[tuple[Any, str, Any]]:
    from twisted.internet import tcp

    return [(tcp.Port, "transport", _eager(tcp.Server))]
