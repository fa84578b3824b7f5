"""WebSocket frames written together leave together, and a socket whose
client stops reading is closed.

WebSocket mode sends every event of a response as a frame of its own (the
protocol's rule: one event, one message), a few dozen per turn where a
Server-Sent Events stream writes each backend read's events in one piece.
Under the ``eager_writes`` patch (``config/patches.py``) each frame would be
a system call of its own: measured, a turn then cost more CPU over a
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

It reads Twisted's internals (``_tempDataLen``, ``dataBuffer``, ``offset``)
and stands in for autobahn's ``sendData``, so it is the ``websocket_writes``
server patch (``config/patches.py``): applied only on the versions of
Twisted, daphne and autobahn it was written for, with the attributes it
relies on there (:func:`check_websocket_writes`), else autobahn's stock path
with one warning at start-up; ``SWITCHYARD_SERVER_PATCHES=-websocket_writes``
switches it off.
"""

from __future__ import annotations

import asyncio
from typing import Any

from config.patch_support import missing, unused_by

# Bytes waiting in the process for a client before its stall clock runs.
HIGH_WATER = 1024 * 1024


def _waiting(transport: Any) -> int:
    return transport._tempDataLen + len(transport.dataBuffer) - transport.offset


def check_websocket_writes() -> list[str]:
    """Why the internals the joined path relies on are not there (none: they are)."""
    from daphne import ws_protocol
    from twisted.internet import abstract, tcp

    problems = []
    if ws_protocol.WebSocketFactory.protocol is not ws_protocol.WebSocketProtocol:
        problems.append("daphne.ws_protocol.WebSocketFactory.protocol is not WebSocketProtocol")
    # The joined path is sendData's plain write, under sendData's conditions.
    problems += unused_by(
        ws_protocol.WebSocketProtocol.sendData,
        "send_queue",
        "transport",
        "trafficStats",
        "logOctets",
    )
    problems += missing(ws_protocol.WebSocketProtocol, "STATE_OPEN", "dropConnection")
    problems += missing(tcp.Server, "dataBuffer", "offset", "TLS", "producer", "registerProducer")
    problems += unused_by(abstract.FileDescriptor.__init__, "_tempDataLen")
    return problems


def build_websocket_writes() -> list[tuple[Any, str, Any]]:
    from daphne import ws_protocol

    joined = coalescing(ws_protocol.WebSocketProtocol)
    return [(ws_protocol.WebSocketFactory, "protocol", joined)]


def coalescing(protocol: type) -> type:
    """A subclass of daphne's WebSocket protocol whose frames are joined."""
    from twisted.internet import reactor
    from twisted.internet.abstract import FileDescriptor

    clock: Any = reactor
    open_state = getattr(protocol, "STATE_OPEN")  # noqa: B009 (a class built at run time)

    class Coalescing(protocol):  # type: ignore[valid-type, misc]
        _written = 0
        _stall: Any = None
        _pending: list[bytes] | None = None
        _drained: Any = None  # a future while Twisted has paused the socket
        _joined = False  # plain TCP, with Twisted's buffer as expected
        _loop: Any = None
        _stall_seconds = 0.0

        def connectionMade(self) -> None:
            from django.conf import settings

            super().connectionMade()
            transport = self.transport
            self._loop = asyncio.get_event_loop()  # daphne's: the reactor's
            self._stall_seconds = settings.SWITCHYARD_CLIENT_STALL_SECONDS
            self._joined = (
                isinstance(transport, FileDescriptor)
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
                self._drained = self._loop.create_future()
                if self._stall is None:
                    self._stall = clock.callLater(self._stall_seconds, self._stalled, self._sent())

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
                self._loop.call_soon(self._flush)
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
                self._stall = clock.callLater(self._stall_seconds, self._stalled, self._sent())

        def _sent(self) -> int:
            return self._written - _waiting(self.transport)

        def _stalled(self, sent_before: int) -> None:
            self._stall = None
            if not self.transport.connected:
                return
            if self._sent() == sent_before:
                self.dropConnection(abort=True)  # nothing taken: the client is gone
            elif self._drained is not None or _waiting(self.transport) > HIGH_WATER:
                self._stall = clock.callLater(self._stall_seconds, self._stalled, self._sent())

        def connectionLost(self, reason: Any) -> None:
            self._pending = None
            self._release()
            if self._stall is not None:
                self._stall.cancel()
                self._stall = None
            super().connectionLost(reason)

    Coalescing.__name__ = Coalescing.__qualname__ = f"Coalescing{protocol.__name__}"
    return Coalescing
