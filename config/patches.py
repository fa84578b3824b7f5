"""Every patch of a third-party internal the web process applies, in one place.

``config.serve`` calls :func:`apply` once, before daphne's reactor runs. Each
patch names the versions of the distributions it was written for (the pins
in pyproject.toml) and checks the attributes it relies on; when a version or
an attribute differs, that patch is not applied, the server keeps the stock
behaviour, and one warning (logger ``switchyard.server``) names every patch
left out and why. In production (``SWITCHYARD_PRODUCTION``) a patch that
bounds what a client can make the process hold (``protects``) is never left
out so quietly: the process refuses to start, naming the patch, the versions
it was written for and the value of ``SWITCHYARD_SERVER_PATCHES`` that drops
it (for a deployment whose reverse proxy enforces the same limits:
platform/nginx/). After an upgrade, re-measure (bench/README.md, section 28)
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
model's answer usually arrives). Each saves work in at least one of them:

- ``daphne_factory``: daphne's ``Server.run`` builds its HTTP factory from
  the module-level name ``daphne.server.HTTPFactory``; a subclass is put
  there. Its requests skip Twisted's parsing of a POST's ``Content-Type``
  (``parsePOSTFormSubmission=False``: HTML form decoding that daphne never
  reads) and its access log line (``HTTPFactory.log``, which daphne
  discards), both public Twisted API once the factory is this one.
  Its requests also enforce the body cap and deadline while Twisted
  receives the body (``_BodyLimits``, through ``Request.gotLength`` and
  ``handleContentChunk``): without it daphne holds a whole body in memory
  before the API can refuse it (``tests/ops/test_body_limits.py``). And their status
  lines carry the standard reason phrase (``Request.setResponseCode``,
  which sets ``code_message``): Twisted's table lacks some codes the API
  sends, and 429 would go out as ``429 Unknown Status``.
- ``eager_writes``: Twisted's TCP ports make their connections' transports
  from ``tcp.Port.transport``; the subclass put there sends a write at once
  when nothing is queued before it (Twisted's buffer attributes
  ``_tempDataLen``, ``dataBuffer``, ``offset``, ``_writeDisconnected``),
  instead of from the reactor's next turn, which matters most to a paced
  stream.
- ``http_module``: daphne reaches ``twisted.web.http`` through Twisted's
  deprecation proxy for the module (``twisted.python.deprecate._ModuleProxy``,
  a Python ``__getattribute__`` per look-up, one per chunk of a stream); the
  name ``daphne.http_protocol.http`` gets the module behind it.
- ``websocket_writes``: daphne's WebSocket factory makes its protocols from
  ``daphne.ws_protocol.WebSocketFactory.protocol``; the subclass put there
  (``config/websocket_writes.py``) writes the frames a socket is given in one
  turn of the event loop in one call, past autobahn's ``sendData``, and is
  its connection's push producer, reading Twisted's buffer attributes
  (``_tempDataLen``, ``dataBuffer``, ``offset``) to bound what a client that
  does not read makes the process hold. Off: a WebSocket turn costs more
  CPU than the same response over SSE, and such a client's frames are held
  whole.

Two patches bound what a hostile or broken client can make the process
hold, rather than save instructions (``tests/ops/test_hostile_clients.py``):

- ``backpressure``: daphne's requests are made from the module-level name
  ``daphne.http_protocol.WebRequest``; the subclass put there registers
  itself as its connection's push producer (Twisted's public API), and
  daphne's ``Server.handle_reply``, the ``send`` of every application, is
  replaced by the same lines followed by a wait while Twisted has paused
  the request (:class:`_Backpressure`). A client that stops reading a
  stream then costs a bounded buffer instead of the whole stream, and one that reads nothing for
  ``SWITCHYARD_CLIENT_STALL_SECONDS`` is disconnected (a 499). Per send,
  one attribute look-up; per request, a producer registered and removed.
- ``header_timeout``: Twisted's HTTP factory makes its channels with
  ``HTTPFactory.protocol``; daphne's factory gets one whose channel closes
  a connection whose request line and headers are not complete
  ``SWITCHYARD_HEADER_TIMEOUT_SECONDS`` after it opened, or after the first
  byte of a later request (:class:`_HeaderDeadline`). Without it, a client
  sending a byte now and then holds a connection for ever (Twisted's own
  timeout is an idle one). Per request, one timer started and cancelled.

Measured and dropped (too little gain with the others on): a stream's chunks
written past daphne's ``handle_reply`` (which ``http_module`` makes cheap),
and a response's first bytes held back for one ``send()``.

TCP_NODELAY is not a patch: Twisted's ``HTTPChannel.connectionMade`` sets it
once per connection (``tests/ops/test_serve.py`` checks it on a live server).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from config import upload_limits
from config.patch_support import Patch, Refused, logger, missing, refusal, unused_by
from config.patches_bounds import (
    build_backpressure,
    build_header_timeout,
    check_backpressure,
    check_header_timeout,
)
from config.patches_writes import build_eager_writes, check_eager_writes
from config.websocket_writes import build_websocket_writes, check_websocket_writes

ENV = "SWITCHYARD_SERVER_PATCHES"

# The versions the patches were written and measured for: pyproject.toml's
# pins (tests/ops/test_patches.py keeps the two in step).
TWISTED = "26.10.0"
DAPHNE = "4.2.3"
# daphne's dependency, not pinned in pyproject.toml: the version installed
# with the pinned daphne.
AUTOBAHN = "26.11.1"


# --- daphne_factory --------------------------------------------------------------


def _check_daphne_factory() -> list[str]:
    from daphne import http_protocol, server
    from twisted.web import http

    problems = unused_by(server.Server.run, "HTTPFactory")
    if server.HTTPFactory is not http_protocol.HTTPFactory:
        problems.append("daphne.server.HTTPFactory is not daphne.http_protocol.HTTPFactory")
    problems += unused_by(http_protocol.HTTPFactory.buildProtocol, "requestFactory")
    problems += unused_by(http.Request.__init__, "parsePOSTFormSubmission")
    problems += missing(http.HTTPFactory, "log")
    problems += missing(http.Request, "gotLength", "handleContentChunk", "requestReceived")
    problems += unused_by(http.Request.setResponseCode, "code_message")
    return problems


class _BodyLimits:
    """The body cap and deadline, enforced while Twisted receives the body.

    daphne calls the application only once Twisted has the whole body, and
    then queues all of it for the application at once, so the API's own
    checks (``responses_api.edge.http.read_body``) come too late to save the
    memory: here a ``Content-Length`` over ``SWITCHYARD_MAX_BODY_BYTES`` is
    refused before a byte of the body is read, a chunked body as soon as it
    passes the cap, and a body not complete within
    ``SWITCHYARD_BODY_TIMEOUT_SECONDS`` gets a 408. The answer is the API's
    error envelope with an ``X-Request-Id``, and the connection is closed.
    """

    _received = 0
    _refused = False
    _deadline: Any = None

    _upload = False

    def gotLength(self, length: int | None) -> None:
        from twisted.internet import reactor

        self.requestHeaders.removeHeader(upload_limits.REFUSED)  # type: ignore[attr-defined]
        self._upload = upload_limits.is_upload(self.channel)  # type: ignore[attr-defined]
        if length is not None and length > self._cap():
            if self._upload:
                super().gotLength(0)  # type: ignore[misc]
                self._hand_over()
            else:
                self._refuse(413)
            return
        super().gotLength(length)  # type: ignore[misc]
        seconds = upload_limits.body_seconds(self._upload)
        self._deadline = reactor.callLater(  # type: ignore[attr-defined]
            seconds,  # type: ignore[arg-type]
            self._refuse,
            408,
        )

    def _cap(self) -> int:
        return upload_limits.body_cap(self._upload)

    def _hand_over(self) -> None:
        """An upload past its cap: answered by the application (upload_limits)."""
        self._refused = True
        self._stop_deadline()
        super().requestReceived(*upload_limits.mark_refused(self))  # type: ignore[misc]

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._received > self._cap():
            if self._upload:
                self._hand_over()
            else:
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

        from responses_api.protocol.errors import body_too_large, body_too_slow

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


# --- http_module -----------------------------------------------------------------


def _check_http_module() -> list[str]:
    from daphne import http_protocol
    from twisted.python import deprecate

    problems = missing(deprecate, "_ModuleProxy")
    if problems:
        return problems
    if not isinstance(http_protocol.http, deprecate._ModuleProxy):
        problems.append("daphne.http_protocol.http is not behind Twisted's _ModuleProxy")
    return problems + unused_by(deprecate._ModuleProxy.__init__, "_module")


def _build_http_module() -> list[tuple[Any, str, Any]]:
    # daphne reaches ``twisted.web.http`` (``http.Request.__init__``,
    # ``.write``, ``.finish``: several a request, one per chunk of a
    # stream) through Twisted's deprecation proxy for that module, a Python
    # ``__getattribute__`` per look-up. The names are the module's own.
    from daphne import http_protocol

    return [(http_protocol, "http", object.__getattribute__(http_protocol.http, "_module"))]


PATCHES = (
    # Before daphne_factory, whose requests are made from the WebRequest it sets.
    Patch(
        "backpressure",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        check_backpressure,
        build_backpressure,
        "a client that stops reading holds a bounded buffer, and is cut off after "
        "SWITCHYARD_CLIENT_STALL_SECONDS",
    ),
    Patch(
        "daphne_factory",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_daphne_factory,
        _build_daphne_factory,
        "SWITCHYARD_MAX_BODY_BYTES and SWITCHYARD_BODY_TIMEOUT_SECONDS before a body "
        "is held; reason phrases of 429 and 499",
    ),
    Patch("eager_writes", {"Twisted": TWISTED}, check_eager_writes, build_eager_writes),
    Patch(
        "header_timeout",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        check_header_timeout,
        build_header_timeout,
        "SWITCHYARD_HEADER_TIMEOUT_SECONDS",
    ),
    Patch(
        "http_module",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_http_module,
        _build_http_module,
    ),
    Patch(
        "websocket_writes",
        {"Twisted": TWISTED, "daphne": DAPHNE, "autobahn": AUTOBAHN},
        check_websocket_writes,
        build_websocket_writes,
        "a WebSocket client that stops reading is held as an HTTP one is",
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


def without(spec: str | None, names: list[str]) -> str:
    """The value of ``SWITCHYARD_SERVER_PATCHES`` that selects what ``spec``
    does less ``names``."""
    kept = [n for n in selected(spec) if n not in names]
    if not kept:
        return "none"
    if spec and spec.strip() not in ("all", "") and not spec.strip().startswith("-"):
        return ",".join(kept)
    return ",".join(f"-{n}" for n in NAMES if n not in kept)


def apply(spec: str | None, *, production: bool = False) -> list[str]:
    """Apply the patches ``spec`` selects whose internals are there.

    Returns the names of those applied; the others are named in one warning.
    In production, a selected patch that protects and cannot be applied
    raises :class:`Refused` before any is applied: its bound would be gone
    with nothing but a warning to say so.
    """
    wanted = selected(spec)
    # Every check runs before any patch is built: none reads what another replaces.
    found = [(p, p.problems()) for p in PATCHES if p.name in wanted]
    blocked = [(p, problems) for p, problems in found if problems and p.protects]
    if production and blocked:
        names = [p.name for p, _ in blocked]
        raise Refused(refusal(ENV, blocked, without(spec, names)))
    applied, left_out = [], []
    for patch, problems in found:
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
