"""The server patches that bound memory and connections rather than save
instructions: ``backpressure`` and ``header_timeout`` (``config.patches``
lists every patch and applies them)."""

from __future__ import annotations

from typing import Any

from config.patch_support import logger, missing, unused_by

# --- backpressure ----------------------------------------------------------------


def check_backpressure() -> list[str]:
    from daphne import http_protocol, server
    from twisted.internet import abstract, tcp
    from twisted.web import http

    problems = unused_by(server.Server.create_application, "handle_reply")
    # _handle_reply repeats daphne's lines: the names they rely on.
    problems += unused_by(
        server.Server.handle_reply, "connections", "check_headers_type", "basic_error"
    )
    problems += unused_by(http_protocol.HTTPFactory.buildProtocol, "WebRequest")
    problems += missing(http.Request, "registerProducer", "unregisterProducer", "producer")
    problems += unused_by(http.HTTPChannel.pauseProducing, "_requestProducer")
    problems += unused_by(http.HTTPChannel.resumeProducing, "_requestProducer")
    problems += unused_by(http.HTTPChannel.stopProducing, "_requestProducer")
    problems += missing(tcp.Server, "dataBuffer", "offset", "abortConnection")
    problems += unused_by(abstract.FileDescriptor.__init__, "_tempDataLen")
    return problems


class _Backpressure:
    """A response's writes wait while the client does not read.

    daphne's ``send`` hands each body message to Twisted and returns at
    once, and Twisted buffers whatever it cannot send yet: a client that
    stops reading a long stream has the process hold all of it
    (``tests/ops/test_hostile_clients.py``). The request is
    registered as the push producer of its connection (Twisted's public
    producer/consumer API), so Twisted pauses it once its write buffer
    holds more than ``bufferSize`` (64 KiB) beyond the kernel's, and
    resumes it once that buffer is empty; while paused, ``send`` does not
    return (:func:`_handle_reply`), which ASGI allows a server to do.

    A client that reads nothing for ``SWITCHYARD_CLIENT_STALL_SECONDS``
    while paused has its connection aborted: the application gets
    ``http.disconnect`` and the request ends as a client gone (499). One
    that reads slowly is not cut off: Twisted resumes only once its buffer
    is empty, which at a slow reader's pace can take longer than the
    deadline, so each time the deadline passes, less left to send than at
    the last look (Twisted's ``dataBuffer``, ``offset``, ``_tempDataLen``
    and the socket's send queue) starts another. A transport without that
    buffer (TLS served by daphne itself) shows no progress: the deadline
    then counts the whole pause.
    """

    _drained: Any = None  # a future while paused
    _stall: Any = None
    _unsent: int | None = 0  # left to send, at the last look

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        self.registerProducer(self, True)  # type: ignore[attr-defined]
        super().requestReceived(command, path, version)  # type: ignore[misc]

    def pauseProducing(self) -> None:
        import asyncio

        from django.conf import settings

        if self._drained is not None:
            return  # Twisted pauses again at every write while the buffer is full
        loop = asyncio.get_event_loop()
        self._drained = loop.create_future()
        self._unsent = self._buffered()
        self._stall = loop.call_later(settings.SWITCHYARD_CLIENT_STALL_SECONDS, self._stalled)

    def resumeProducing(self) -> None:
        self._release()

    def stopProducing(self) -> None:
        self._release()

    def finish(self) -> None:
        # The last bytes are with Twisted: nothing more to wait for.
        self._release()
        if self.producer is not None:  # type: ignore[attr-defined]
            self.unregisterProducer()  # type: ignore[attr-defined]
        super().finish()  # type: ignore[misc]

    def connectionLost(self, reason: Any) -> None:
        self._release()
        if self.producer is not None and self.channel is not None:  # type: ignore[attr-defined]
            self.unregisterProducer()  # type: ignore[attr-defined]
        super().connectionLost(reason)  # type: ignore[misc]

    def _release(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        drained = self._drained
        if drained is not None:
            self._drained = None
            if not drained.done():
                drained.set_result(None)

    def _buffered(self) -> int | None:
        """The response's bytes the client has not taken yet: Twisted's
        buffer, and the socket's send queue (unsent or unacknowledged, which
        shrinks as the client reads; Twisted refills it only once half of
        it is free)."""
        import fcntl
        import struct
        import termios

        channel = self.channel  # type: ignore[attr-defined]
        transport = channel.transport if channel is not None else None
        if transport is None or not hasattr(transport, "dataBuffer"):
            return None
        held = len(transport.dataBuffer) - transport.offset + transport._tempDataLen
        try:
            # SIOCOUTQ, which Linux names TIOCOUTQ for sockets too.
            queued = fcntl.ioctl(transport.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
        except OSError:
            return int(held)
        return int(held) + int(struct.unpack("i", queued)[0])

    def _stalled(self) -> None:
        import asyncio

        from django.conf import settings

        self._stall = None
        channel = self.channel  # type: ignore[attr-defined]
        if channel is None or channel.transport is None:
            return
        unsent = self._buffered()
        if unsent is not None and self._unsent is not None and unsent < self._unsent:
            self._unsent = unsent  # the client reads, slowly
            self._stall = asyncio.get_event_loop().call_later(
                settings.SWITCHYARD_CLIENT_STALL_SECONDS, self._stalled
            )
            return
        logger.info(
            "client stopped reading for %ss: connection closed",
            settings.SWITCHYARD_CLIENT_STALL_SECONDS,
            extra={"switchyard": {"client": str(channel.transport.getPeer())}},
        )
        channel.transport.abortConnection()


async def _handle_reply(self: Any, protocol: Any, message: Any) -> None:
    """daphne's ``Server.handle_reply`` (4.2.3), the ``send`` of every
    application, and then a wait while the connection's writes are paused
    (:class:`_Backpressure`). Its lines are daphne's own, not a call to
    them: one coroutine less per chunk of a stream."""
    if protocol not in self.connections or self.connections[protocol].get("disconnected", None):
        return
    try:
        self.check_headers_type(message)
    except ValueError:
        protocol.basic_error(500, b"Server Error", "Server Error")
        raise
    protocol.handle_reply(message)
    drained = getattr(protocol, "_drained", None)  # daphne's WebSocket protocol has none
    if drained is not None and not drained.done():
        await drained


def build_backpressure() -> list[tuple[Any, str, Any]]:
    from daphne import http_protocol, server

    class WebRequest(_Backpressure, http_protocol.WebRequest):
        pass

    # Both the stock factory and daphne_factory's (built after this one)
    # make their requests from this name.
    return [
        (http_protocol, "WebRequest", WebRequest),
        (server.Server, "handle_reply", _handle_reply),
    ]


# --- header_timeout --------------------------------------------------------------


def check_header_timeout() -> list[str]:
    from daphne import http_protocol
    from twisted.web import http

    problems = []
    if http_protocol.HTTPFactory.protocol is not http._genericHTTPChannelProtocolFactory:
        problems.append("daphne's HTTPFactory.protocol is not Twisted's generic channel factory")
    problems += missing(http, "_GenericHTTPChannelProtocol")
    problems += missing(http.HTTPChannel, "timeoutConnection", "connectionMade")
    problems += unused_by(http.HTTPChannel.lineReceived, "allHeadersReceived")
    problems += unused_by(http.HTTPChannel.requestDone, "setLineMode")
    return problems


class _HeaderDeadline:
    """A request's line and headers must arrive within
    ``SWITCHYARD_HEADER_TIMEOUT_SECONDS``, counted from the connection's
    opening for its first request and from the first byte of each later
    one; past it, Twisted's own timeout closes the connection.

    Twisted's only timeout is an idle one, restarted by every byte, so a
    client sending a header a byte at a time holds a connection for ever;
    daphne's ``--http-timeout`` counts from the complete request (it bounds
    the response) and ``--websocket_connect_timeout`` only the WebSocket
    handshake. The body has its own deadline (``_BodyLimits``).
    """

    _head_deadline: Any = None
    _awaiting_head = True

    def connectionMade(self) -> None:
        super().connectionMade()  # type: ignore[misc]
        self._arm_head_deadline()

    def dataReceived(self, data: bytes) -> None:
        if self._awaiting_head and self._head_deadline is None:
            self._arm_head_deadline()
        super().dataReceived(data)  # type: ignore[misc]

    def allHeadersReceived(self) -> None:
        self._awaiting_head = False
        self._stop_head_deadline()
        super().allHeadersReceived()  # type: ignore[misc]

    def requestDone(self, request: Any) -> None:
        # Before Twisted replays the next request's bytes, already received.
        self._awaiting_head = True
        super().requestDone(request)  # type: ignore[misc]

    def connectionLost(self, reason: Any) -> None:
        self._stop_head_deadline()
        super().connectionLost(reason)  # type: ignore[misc]

    def _arm_head_deadline(self) -> None:
        import asyncio

        from django.conf import settings

        self._head_deadline = asyncio.get_event_loop().call_later(
            settings.SWITCHYARD_HEADER_TIMEOUT_SECONDS, self._head_too_slow
        )

    def _stop_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        self.timeoutConnection()  # type: ignore[attr-defined]


def build_header_timeout() -> list[tuple[Any, str, Any]]:
    from daphne import http_protocol
    from twisted.web import http

    class HTTPChannel(_HeaderDeadline, http.HTTPChannel):  # type: ignore[misc]
        pass

    def protocol(factory: Any) -> Any:
        # Twisted's _genericHTTPChannelProtocolFactory, with this channel.
        return http._GenericHTTPChannelProtocol(HTTPChannel())

    return [(http_protocol.HTTPFactory, "protocol", protocol)]
