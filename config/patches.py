"""Every patch of a third-party internal the web process applies, in one place.

``config.serve`` calls :func:`apply` once, before daphne's reactor runs. Each
patch names the versions of the distributions it was written for (the pins
in pyproject.toml) and checks the attributes it relies on; when a version or
an attribute differs, that patch is not applied, the server keeps the stock
behaviour, and one warning (logger ``switchyard.server``) names every patch
left out and why. After an upgrade, re-measure (bench/README.md, section 28)
and bump the versions here, or delete the patch.

``SWITCHYARD_SERVER_PATCHES`` selects them: unset or ``all`` for every patch,
``none`` for stock daphne and Twisted, a comma-separated list of names for
those only, or names prefixed with ``-`` (``-eager_writes``) for all but
those. An unknown name is an error at start-up.

The patches that save work, with what switching each off alone costs in
instructions of the event loop (``bench/instructions.py --server-patches``;
section 28 of bench/README.md has the table) per non-streaming request, per token of a
200-token stream sent as fast as the backend writes it, and per token of
one paced at 50 tokens/s (a backend read and a client write per token, as a
model's answer usually arrives). Each saves at least 3 % in one of them:

- ``daphne_factory``: daphne's ``Server.run`` builds its HTTP factory from
  the module-level name ``daphne.server.HTTPFactory``; a subclass is put
  there. Its requests skip Twisted's parsing of a POST's ``Content-Type``
  (``parsePOSTFormSubmission=False``: HTML form decoding that daphne never
  reads) and its access log line (``HTTPFactory.log``, which daphne
  discards), both public Twisted API once the factory is this one.
  Off: +20.4 % per request, +3.9 % per token, +2.2 % per paced token.
  Its requests also enforce the body cap and deadline while Twisted
  receives the body (``_BodyLimits``, through ``Request.gotLength`` and
  ``handleContentChunk``): without it daphne holds a whole body in memory
  before the API can refuse it (ten 100 MB uploads: +714 MB of RSS, against
  under 20 MB with it; ``tests/ops/test_body_limits.py``). And their status
  lines carry the standard reason phrase (``Request.setResponseCode``,
  which sets ``code_message``): Twisted's table lacks some codes the API
  sends, and 429 would go out as ``429 Unknown Status``.
- ``eager_writes``: Twisted's TCP ports make their connections' transports
  from ``tcp.Port.transport``; the subclass put there sends a write at once
  when nothing is queued before it (Twisted's buffer attributes
  ``_tempDataLen``, ``dataBuffer``, ``offset``, ``_writeDisconnected``),
  instead of from the reactor's next turn. Off: +4.1 % per request, +0.9 %
  per token, +37 % per paced token.
- ``http_module``: daphne reaches ``twisted.web.http`` through Twisted's
  deprecation proxy for the module (``twisted.python.deprecate._ModuleProxy``,
  a Python ``__getattribute__`` per look-up, one per chunk of a stream); the
  name ``daphne.http_protocol.http`` gets the module behind it. Off: +2.5 %
  per request, +1.1 % per token, +14 % per paced token.

Two patches bound what a hostile or broken client can make the process
hold, rather than save instructions (``tests/ops/test_hostile_clients.py``):

- ``backpressure``: daphne's requests are made from the module-level name
  ``daphne.http_protocol.WebRequest``; the subclass put there registers
  itself as its connection's push producer (Twisted's public API), and
  daphne's ``Server.handle_reply``, the ``send`` of every application, is
  replaced by the same lines followed by a wait while Twisted has paused
  the request (:class:`_Backpressure`). A client that stops reading a
  stream then costs a bounded buffer instead of the whole stream (300 MiB
  to a client that read nothing: RSS from 241 to 2,705 MB without it;
  with it, under 40 MB more), and one that reads nothing for
  ``SWITCHYARD_CLIENT_STALL_SECONDS`` is disconnected (a 499). Per send,
  one attribute look-up; per request, a producer registered and removed.
- ``header_timeout``: Twisted's HTTP factory makes its channels with
  ``HTTPFactory.protocol``; daphne's factory gets one whose channel closes
  a connection whose request line and headers are not complete
  ``SWITCHYARD_HEADER_TIMEOUT_SECONDS`` after it opened, or after the first
  byte of a later request (:class:`_HeaderDeadline`). Without it, a client
  sending a byte now and then holds a connection for ever (Twisted's own
  timeout is an idle one). Per request, one timer started and cancelled.

Measured and dropped (under 3 % each with the others on): a stream's chunks
written past daphne's ``handle_reply`` (which ``http_module`` makes cheap),
and a response's first bytes held back for one ``send()``.

TCP_NODELAY is not a patch: Twisted's ``HTTPChannel.connectionMade`` sets it
once per connection (``tests/ops/test_serve.py`` checks it on a live server).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from importlib.metadata import version
from typing import Any

logger = logging.getLogger("switchyard.server")

ENV = "SWITCHYARD_SERVER_PATCHES"

# The versions the patches were written and measured for: pyproject.toml's
# pins (tests/ops/test_patches.py keeps the two in step).
TWISTED = "26.10.0"
DAPHNE = "4.2.3"


@dataclass(frozen=True)
class Patch:
    """Third-party attributes to replace, only if what they rely on is there."""

    name: str
    written_for: dict[str, str]
    # Why the internals it relies on are not there (empty: they are).
    check: Callable[[], list[str]]
    # (owner, attribute, value) to set.
    build: Callable[[], list[tuple[Any, str, Any]]]

    def problems(self) -> list[str]:
        """Why this patch cannot be applied here: versions first, then attributes."""
        found = [
            f"{dist} is {installed}, not {wanted}"
            for dist, wanted in self.written_for.items()
            if (installed := version(dist)) != wanted
        ]
        return found or self.check()


def _missing(owner: Any, *names: str) -> list[str]:
    return [f"{owner.__name__}.{n} is missing" for n in names if not hasattr(owner, n)]


def _unused_by(function: Any, *names: str) -> list[str]:
    """The names among ``names`` that ``function``'s code no longer refers to."""
    code = function.__code__
    return [
        f"{function.__qualname__} no longer uses {n}"
        for n in names
        if n not in code.co_names and n not in code.co_varnames
    ]


# --- daphne_factory --------------------------------------------------------------


def _check_daphne_factory() -> list[str]:
    from daphne import http_protocol, server
    from twisted.web import http

    problems = _unused_by(server.Server.run, "HTTPFactory")
    if server.HTTPFactory is not http_protocol.HTTPFactory:
        problems.append("daphne.server.HTTPFactory is not daphne.http_protocol.HTTPFactory")
    problems += _unused_by(http_protocol.HTTPFactory.buildProtocol, "requestFactory")
    problems += _unused_by(http.Request.__init__, "parsePOSTFormSubmission")
    problems += _missing(http.HTTPFactory, "log")
    problems += _missing(http.Request, "gotLength", "handleContentChunk", "requestReceived")
    problems += _unused_by(http.Request.setResponseCode, "code_message")
    return problems


class _BodyLimits:
    """The body cap and deadline, enforced while Twisted receives the body.

    daphne calls the application only once Twisted has the whole body, and
    then queues all of it for the application at once, so the API's own
    checks (``responses_api.consumers.read_body``) come too late to save the
    memory: here a ``Content-Length`` over ``SWITCHYARD_MAX_BODY_BYTES`` is
    refused before a byte of the body is read, a chunked body as soon as it
    passes the cap, and a body not complete within
    ``SWITCHYARD_BODY_TIMEOUT_SECONDS`` gets a 408. The answer is the API's
    error envelope with an ``X-Request-Id``, and the connection is closed.
    """

    _received = 0
    _refused = False
    _deadline: Any = None

    def gotLength(self, length: int | None) -> None:
        from django.conf import settings
        from twisted.internet import reactor

        if length is not None and length > settings.SWITCHYARD_MAX_BODY_BYTES:
            self._refuse(413)
            return
        super().gotLength(length)  # type: ignore[misc]
        self._deadline = reactor.callLater(  # type: ignore[attr-defined]
            settings.SWITCHYARD_BODY_TIMEOUT_SECONDS, self._refuse, 408
        )

    def handleContentChunk(self, data: bytes) -> None:
        from django.conf import settings

        if self._refused:
            return
        self._received += len(data)
        if self._received > settings.SWITCHYARD_MAX_BODY_BYTES:
            self._refuse(413)
            return
        super().handleContentChunk(data)  # type: ignore[misc]

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        self._stop_deadline()
        if not self._refused:
            super().requestReceived(command, path, version)  # type: ignore[misc]

    def connectionLost(self, reason: Any) -> None:
        self._stop_deadline()
        super().connectionLost(reason)  # type: ignore[misc]

    def _stop_deadline(self) -> None:
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    def _refuse(self, status: int) -> None:
        import uuid

        from django.conf import settings

        from responses_api.errors import body_too_large, body_too_slow

        if self._refused:
            return
        self._refused = True
        self._stop_deadline()
        if status == 413:
            error = body_too_large(settings.SWITCHYARD_MAX_BODY_BYTES)
        else:
            error = body_too_slow(settings.SWITCHYARD_BODY_TIMEOUT_SECONDS)
        request_id = str(uuid.uuid4())
        body = error.to_bytes()
        reason = _PHRASES[status]
        head = (
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"x-request-id: %s\r\nconnection: close\r\n\r\n"
            % (status, reason, len(body), request_id.encode())
        )
        logger.info(
            "request body refused",
            extra={"switchyard": {"request_id": request_id, "status": status}},
        )
        transport = self.channel.transport  # type: ignore[attr-defined]
        transport.write(head + body)
        transport.loseConnection()


_PHRASES = {status.value: status.phrase.encode() for status in HTTPStatus}
# Not in RFC 9110: nginx's name for the code the API records for a client gone.
_PHRASES[499] = b"Client Closed Request"


def _build_daphne_factory() -> list[tuple[Any, str, Any]]:
    from daphne import http_protocol, server

    class WebRequest(_BodyLimits, http_protocol.WebRequest):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # Twisted parses a POST's Content-Type with the email package to
            # decode HTML forms into ``request.args``, which daphne never
            # reads (the ASGI application gets the raw body).
            super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

        def setResponseCode(self, code: int, message: bytes | None = None) -> None:
            # Twisted's table of reason phrases lacks some codes the API
            # sends (429 goes out as "429 Unknown Status"): the standard
            # phrase of RFC 9110 and its extensions, as Python knows them.
            # A code Python does not know keeps Twisted's own fallback.
            super().setResponseCode(code, message or _PHRASES.get(code))

    class HTTPFactory(http_protocol.HTTPFactory):
        def buildProtocol(self, addr: Any) -> Any:
            protocol = super().buildProtocol(addr)
            protocol.requestFactory = WebRequest
            return protocol

        def log(self, request: Any) -> None:
            """Twisted's access log line, which daphne discards: not formatted."""

    return [(server, "HTTPFactory", HTTPFactory)]


# --- eager_writes ----------------------------------------------------------------


def _check_eager_writes() -> list[str]:
    from twisted.internet import abstract, tcp

    problems = []
    if tcp.Port.transport is not tcp.Server:
        problems.append("twisted.internet.tcp.Port.transport is not tcp.Server")
    problems += _missing(
        tcp.Server, "dataBuffer", "offset", "_writeDisconnected", "TLS", "writeSomeData"
    )
    problems += _unused_by(abstract.FileDescriptor.__init__, "_tempDataLen")
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


def _build_eager_writes() -> list[tuple[Any, str, Any]]:
    from twisted.internet import tcp

    return [(tcp.Port, "transport", _eager(tcp.Server))]


# --- http_module -----------------------------------------------------------------


def _check_http_module() -> list[str]:
    from daphne import http_protocol
    from twisted.python import deprecate

    problems = _missing(deprecate, "_ModuleProxy")
    if problems:
        return problems
    if not isinstance(http_protocol.http, deprecate._ModuleProxy):
        problems.append("daphne.http_protocol.http is not behind Twisted's _ModuleProxy")
    return problems + _unused_by(deprecate._ModuleProxy.__init__, "_module")


def _build_http_module() -> list[tuple[Any, str, Any]]:
    # daphne reaches ``twisted.web.http`` (``http.Request.__init__``,
    # ``.write``, ``.finish``: several a request, one per chunk of a
    # stream) through Twisted's deprecation proxy for that module, a Python
    # ``__getattribute__`` per look-up. The names are the module's own.
    from daphne import http_protocol

    return [(http_protocol, "http", object.__getattribute__(http_protocol.http, "_module"))]


# --- backpressure ----------------------------------------------------------------


def _check_backpressure() -> list[str]:
    from daphne import http_protocol, server
    from twisted.internet import abstract, tcp
    from twisted.web import http

    problems = _unused_by(server.Server.create_application, "handle_reply")
    # _handle_reply repeats daphne's lines: the names they rely on.
    problems += _unused_by(
        server.Server.handle_reply, "connections", "check_headers_type", "basic_error"
    )
    problems += _unused_by(http_protocol.HTTPFactory.buildProtocol, "WebRequest")
    problems += _missing(http.Request, "registerProducer", "unregisterProducer", "producer")
    problems += _unused_by(http.HTTPChannel.pauseProducing, "_requestProducer")
    problems += _unused_by(http.HTTPChannel.resumeProducing, "_requestProducer")
    problems += _unused_by(http.HTTPChannel.stopProducing, "_requestProducer")
    problems += _missing(tcp.Server, "dataBuffer", "offset", "abortConnection")
    problems += _unused_by(abstract.FileDescriptor.__init__, "_tempDataLen")
    return problems


class _Backpressure:
    """A response's writes wait while the client does not read.

    daphne's ``send`` hands each body message to Twisted and returns at
    once, and Twisted buffers whatever it cannot send yet: a client that
    stops reading a long stream has the process hold all of it (a 300 MiB
    stream took the process from 241 to 2,705 MB of RSS). The request is
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


def _build_backpressure() -> list[tuple[Any, str, Any]]:
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


def _check_header_timeout() -> list[str]:
    from daphne import http_protocol
    from twisted.web import http

    problems = []
    if http_protocol.HTTPFactory.protocol is not http._genericHTTPChannelProtocolFactory:
        problems.append("daphne's HTTPFactory.protocol is not Twisted's generic channel factory")
    problems += _missing(http, "_GenericHTTPChannelProtocol")
    problems += _missing(http.HTTPChannel, "timeoutConnection", "connectionMade")
    problems += _unused_by(http.HTTPChannel.lineReceived, "allHeadersReceived")
    problems += _unused_by(http.HTTPChannel.requestDone, "setLineMode")
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


def _build_header_timeout() -> list[tuple[Any, str, Any]]:
    from daphne import http_protocol
    from twisted.web import http

    class HTTPChannel(_HeaderDeadline, http.HTTPChannel):  # type: ignore[misc]
        pass

    def protocol(factory: Any) -> Any:
        # Twisted's _genericHTTPChannelProtocolFactory, with this channel.
        return http._GenericHTTPChannelProtocol(HTTPChannel())

    return [(http_protocol.HTTPFactory, "protocol", protocol)]


PATCHES = (
    # Before daphne_factory, whose requests are made from the WebRequest it sets.
    Patch(
        "backpressure",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_backpressure,
        _build_backpressure,
    ),
    Patch(
        "daphne_factory",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_daphne_factory,
        _build_daphne_factory,
    ),
    Patch("eager_writes", {"Twisted": TWISTED}, _check_eager_writes, _build_eager_writes),
    Patch(
        "header_timeout",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_header_timeout,
        _build_header_timeout,
    ),
    Patch(
        "http_module",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_http_module,
        _build_http_module,
    ),
)
NAMES = tuple(p.name for p in PATCHES)


def selected(spec: str | None) -> list[str]:
    """The names ``SWITCHYARD_SERVER_PATCHES`` asks for (see the module's docstring)."""
    spec = (spec or "all").strip()
    if spec == "all":
        return list(NAMES)
    if spec == "none":
        return []
    items = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in items if s.removeprefix("-") not in NAMES]
    if unknown:
        raise ValueError(
            f"{ENV}: unknown patch {', '.join(unknown)}; known: all, none, {', '.join(NAMES)}"
        )
    removed = {s[1:] for s in items if s.startswith("-")}
    if removed and len(removed) != len(items):
        raise ValueError(f"{ENV}: either names or -names, not both")
    return [n for n in NAMES if (n not in removed if removed else n in items)]


def apply(spec: str | None) -> list[str]:
    """Apply the patches ``spec`` selects whose internals are there.

    Returns the names of those applied; the others are named in one warning.
    """
    wanted = selected(spec)
    applied, left_out = [], []
    for patch in PATCHES:
        if patch.name not in wanted:
            continue
        problems = patch.problems()
        if problems:
            left_out.append(f"{patch.name} ({'; '.join(problems)})")
            continue
        for owner, attribute, value in patch.build():
            setattr(owner, attribute, value)
        applied.append(patch.name)
    if left_out:
        logger.warning("Server patches not applied, stock behaviour kept: %s", ", ".join(left_out))
    logger.info("Server patches: %s", ", ".join(applied) or "none")
    return applied
