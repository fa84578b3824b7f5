"""WebSocket frames written together leave together, and a socket whose
client stops reading is closed.

WebSocket mode sends every event of a response as a frame of its own (the
protocol's rule: one event, one message), a few dozen per turn where a
Server-Sent Events stream writes each backend read's events in one piece.
Under the ``eager_writes`` patch (``config/patches.py``) each frame would be
a system call of its own: measured, a turn then cost 15-30 % more CPU over a
WebSocket than over SSE (bench/README.md, "WebSocket mode"). The protocol
below joins the frames a socket is given during one turn of the event loop
and writes them at the end of it, in one call.

A client that does not read is held to what an HTTP client is held to
(``config/patches_bounds.py``): the protocol is its connection's push
producer, so once Twisted holds more than its buffer's worth beyond the
kernel's, the socket's ``send`` waits (the ``backpressure`` patch's
``_handle_reply`` awaits ``_drained``) and the response waits with it; and
a client that takes none of what waits for it for
``SWITCHYARD_CLIENT_STALL_SECONDS`` has its connection dropped, the
response under way ending as a 499.

Only plain TCP transports in the open state take that path; anything else
(TLS, a handshake, a close, autobahn's chopped or synchronous writes) takes
autobahn's own.
"""

from __future__ import annotations

import asyncio
from typing import Any

# Bytes waiting in the process for a client before its stall clock runs.
HIGH_WATER = 1024 * 1024


def _waiting(transport: Any) -> int:
    return transport._tempDataLen + len(transport.dataBuffer) - transport.offset


def coalescing(protocol: type, stall_seconds: float) -> type:
    """A subclass of daphne's WebSocket protocol whose frames are joined."""
    from twisted.internet import reactor, tcp
    from twisted.internet.abstract import FileDescriptor

    clock: Any = reactor
    loop = asyncio.get_event_loop()  # daphne's: the reactor's
    open_state = getattr(protocol, "STATE_OPEN")  # noqa: B009 (a class built at run time)
    # The joined path reads Twisted's buffer: only where it is as expected.
    usable = all(hasattr(tcp.Server, name) for name in ("dataBuffer", "offset"))

    class Coalescing(protocol):  # type: ignore[valid-type, misc]
        _written = 0
        _stall: Any = None
        _pending: list[bytes] | None = None
        _drained: Any = None  # a future while Twisted has paused the socket
        _joined = False  # plain TCP, with Twisted's buffer as expected

        def connectionMade(self) -> None:
            super().connectionMade()
            transport = self.transport
            self._joined = (
                usable
                and isinstance(transport, FileDescriptor)
                and not getattr(transport, "TLS", True)
                and isinstance(getattr(transport, "_tempDataLen", None), int)
            )
            if self._joined:
                if transport.producer is not None:
                    # The upgraded HTTP request's (the backpressure patch's):
                    # the socket produces from now on.
                    transport.unregisterProducer()
                transport.registerProducer(self, True)

        def pauseProducing(self) -> None:
            if self._drained is None:
                self._drained = loop.create_future()
                if self._stall is None:
                    self._stall = clock.callLater(stall_seconds, self._stalled, self._sent())

        def resumeProducing(self) -> None:
            self._release()

        def stopProducing(self) -> None:
            self._release()

        def _release(self) -> None:
            drained, self._drained = self._drained, None
            if drained is not None and not drained.done():
                drained.set_result(None)

        def sendData(self, data: bytes, sync: bool = False, chopsize: Any = None) -> None:
            if (
                not self._joined
                or sync
                or chopsize
                or self.send_queue
                or self.state != open_state
                or self.logOctets
            ):
                self._flush()  # what was joined goes first
                super().sendData(data, sync, chopsize)
                return
            if self._pending is None:
                # The frames written until the loop's next turn, in one write.
                self._pending = [data]
                loop.call_soon(self._flush)
            else:
                self._pending.append(data)

        def _flush(self) -> None:
            pending, self._pending = self._pending, None
            transport = self.transport
            if not pending or transport is None or not transport.connected:
                return
            size = sum(map(len, pending))
            self._written += size
            self.trafficStats.outgoingOctetsWireLevel += size
            transport.writeSequence(pending)
            if self._stall is None and _waiting(transport) > HIGH_WATER:
                self._stall = clock.callLater(stall_seconds, self._stalled, self._sent())

        def _sent(self) -> int:
            return self._written - _waiting(self.transport)

        def _stalled(self, sent_before: int) -> None:
            self._stall = None
            if not self.transport.connected:
                return
            if self._sent() == sent_before:
                self.dropConnection(abort=True)  # nothing taken: the client is gone
            elif self._drained is not None or _waiting(self.transport) > HIGH_WATER:
                self._stall = clock.callLater(stall_seconds, self._stalled, self._sent())

        def connectionLost(self, reason: Any) -> None:
            self._pending = None
            self._release()
            if self._stall is not None:
                self._stall.cancel()
                self._stall = None
            super().connectionLost(reason)

    Coalescing.__name__ = Coalescing.__qualname__ = f"Coalescing{protocol.__name__}"
    return Coalescing
