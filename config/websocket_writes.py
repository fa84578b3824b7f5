"""WebSocket frames written together leave together.

WebSocket mode sends every event of a response as a frame of its own (the
protocol's rule: one event, one message), a few dozen per turn where a
Server-Sent Events stream writes each backend read's events in one piece.
Under the ``eager_writes`` patch (``config/patches.py``) each frame would be
a system call of its own: measured, a turn then cost 15-30 % more CPU over a
WebSocket than over SSE (bench/README.md, "WebSocket mode"). The protocol
below hands a socket's frames to Twisted's own queued write instead, which
sends everything written during one turn of the event loop in one call.

Only plain TCP transports in the open state take that path; anything else
(TLS, a handshake, a close, autobahn's chopped or synchronous writes) takes
autobahn's own.
"""

from __future__ import annotations

from typing import Any


def coalescing(protocol: type) -> type:
    """A subclass of daphne's WebSocket protocol whose frames are queued."""
    from twisted.internet.abstract import FileDescriptor

    open_state = getattr(protocol, "STATE_OPEN")  # noqa: B009 (a class built at run time)

    class Coalescing(protocol):  # type: ignore[valid-type, misc]
        def sendData(self, data: bytes, sync: bool = False, chopsize: Any = None) -> None:
            transport = self.transport
            if (
                sync
                or chopsize
                or self.send_queue
                or self.state != open_state
                or self.logOctets
                or not isinstance(transport, FileDescriptor)
                or getattr(transport, "TLS", True)
            ):
                super().sendData(data, sync, chopsize)
                return
            FileDescriptor.write(transport, data)
            self.trafficStats.outgoingOctetsWireLevel += len(data)

    Coalescing.__name__ = Coalescing.__qualname__ = f"Coalescing{protocol.__name__}"
    return Coalescing
