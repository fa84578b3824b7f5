"""Every patch of a third-party internal the web process applies, in one place.

``config.serve`` calls :func:`apply` once, before daphne's reactor runs. Each
patch names the versions of the distributions it was written for (the pins
in pyproject.toml) and checks the attributes it relies on; when a version or
an attribute differs, that patch is not applied, the server keeps the stock
behaviour, and one warning says why (logger ``switchyard.server``). After an
upgrade, re-measure (bench/README.md, section 28) and bump the versions
here, or delete the patch.

``SWITCHYARD_SERVER_PATCHES`` selects them: unset or ``all`` for every patch,
``none`` for stock daphne and Twisted, a comma-separated list of names for
those only, or names prefixed with ``-`` (``-eager_writes``) for all but
those. An unknown name is an error at start-up.

The patches (what each saves: bench/README.md, section 28):

- ``eager_writes``: Twisted's TCP ports make their connections' transports
  from ``tcp.Port.transport``; the subclass put there sends a write at once
  when nothing is queued before it (Twisted's buffer attributes
  ``_tempDataLen``, ``dataBuffer``, ``offset``, ``_writeDisconnected``),
  instead of from the reactor's next turn.
- ``http_module``: daphne reaches ``twisted.web.http`` through Twisted's
  deprecation proxy for the module (``_ModuleProxy``); daphne gets the module.
- ``daphne_factory``: daphne's ``Server.run`` builds its HTTP factory from
  the module-level name ``daphne.server.HTTPFactory``; this puts a subclass
  there. Its requests skip Twisted's parsing of a POST's ``Content-Type``
  (``parsePOSTFormSubmission=False``: HTML form decoding that daphne never
  reads) and its access log line (``HTTPFactory.log``; daphne keeps its
  own), both public Twisted API once the factory is ours. The two patches
  below change its requests.
- ``first_bytes_together``: a request holds the transport's writes while it
  handles the first body message, so that the status line, headers and
  first data leave in one ``send()``. Needs ``eager_writes``.
- ``chunk_fast_path``: a stream's next chunk is written without daphne's
  ``handle_reply`` (its ``_response_started``).

TCP_NODELAY is not a patch: Twisted's ``HTTPChannel.connectionMade`` sets
it once per connection (``tests/ops/test_serve.py`` checks it on a live
server).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

logger = logging.getLogger("switchyard.server")

ENV = "SWITCHYARD_SERVER_PATCHES"

# The versions every patch here was written and measured for: pyproject.toml's
# pins (tests/ops/test_patches.py keeps the two in step).
TWISTED = "26.10.0"
DAPHNE = "4.2.3"


@dataclass(frozen=True)
class Patch:
    """A replacement of third-party attributes, applied only if it checks out."""

    name: str
    written_for: dict[str, str]
    # Reasons the internals it relies on are not there (empty: they are).
    check: Callable[[], list[str]]
    # (owner, attribute, value) to set, given the names of the patches applied so far.
    build: Callable[[set[str]], list[tuple[Any, str, Any]]]
    needs: tuple[str, ...] = field(default=())

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


def _unset_by(function: Any, *names: str) -> list[str]:
    """The attribute names that ``function``'s code no longer uses."""
    code = function.__code__
    return [f"{function.__qualname__} no longer uses {n}" for n in names if n not in code.co_names]


# --- daphne_factory --------------------------------------------------------------


def _check_daphne_factory() -> list[str]:
    from daphne import http_protocol, server
    from twisted.web import http

    problems = _unset_by(server.Server.run, "HTTPFactory")
    if server.HTTPFactory is not http_protocol.HTTPFactory:
        problems.append("daphne.server.HTTPFactory is not daphne's HTTPFactory")
    problems += _unset_by(http_protocol.HTTPFactory.buildProtocol, "requestFactory")
    problems += _missing(http.HTTPFactory, "log")
    if "parsePOSTFormSubmission" not in http.Request.__init__.__code__.co_varnames:
        problems.append("twisted.web.http.Request takes no parsePOSTFormSubmission")
    return problems


class _NoFormParsing:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Twisted parses a POST's Content-Type with the email package to
        # decode HTML forms into ``request.args``, which daphne never reads
        # (the ASGI application gets the raw body).
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)  # type: ignore[call-arg]


def _build_daphne_factory(active: set[str]) -> list[tuple[Any, str, Any]]:
    from daphne import http_protocol, server

    mixins: list[type] = []
    if "first_bytes_together" in active:
        mixins.append(_FirstBytesTogether)
    if "chunk_fast_path" in active:
        mixins.append(_chunk_fast_path())
    mixins.append(_NoFormParsing)
    request_class = type("WebRequest", (*mixins, http_protocol.WebRequest), {})

    class HTTPFactory(http_protocol.HTTPFactory):
        def buildProtocol(self, addr: Any) -> Any:
            protocol = super().buildProtocol(addr)
            protocol.requestFactory = request_class
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
    problems += _unset_by(abstract.FileDescriptor.__init__, "_tempDataLen")
    return problems


def _eager(base: type) -> type:
    """A Twisted TCP transport that sends a write at once when nothing is
    waiting to be sent before it, as asyncio's transports do.

    Twisted queues every write and sends it from the reactor's next turn:
    two registrations with the event loop (``add_writer``, then
    ``remove_writer``), a turn of the loop and its logging context per
    write, which is per token on a slowly streamed answer. Anything not
    sent at once (a full socket buffer, an error) takes Twisted's own path,
    which also handles flow control and connection loss.
    """

    class Eager(base):  # type: ignore[valid-type, misc]
        held: list[bytes] | None = None

        def hold(self) -> None:
            """Collect writes until :meth:`release`, then send them as one."""
            self.held = []

        def release(self) -> None:
            held, self.held = self.held, None
            if held:
                self.writeSequence(held)

        def write(self, data: bytes) -> None:
            self.writeSequence((data,))

        def writeSequence(self, iovec: Iterable[bytes]) -> None:
            if self.held is not None:
                self.held.extend(iovec)
                return
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


def _build_eager_writes(active: set[str]) -> list[tuple[Any, str, Any]]:
    from twisted.internet import tcp

    return [(tcp.Port, "transport", _eager(tcp.Server))]


# --- first_bytes_together --------------------------------------------------------


def _check_first_bytes_together() -> list[str]:
    from daphne import http_protocol
    from twisted.web import http

    return _missing(http.Request, "startedWriting") + _missing(
        http_protocol.WebRequest, "handle_reply"
    )


class _FirstBytesTogether:
    channel: Any
    startedWriting: int

    def handle_reply(self, message: dict) -> None:
        # The first body message sends the status line and headers, then the
        # data (and, for a whole answer, the end): held together they leave
        # in one system call instead of two or three.
        transport: Any = getattr(self.channel, "transport", None)
        if self.startedWriting or not hasattr(transport, "hold"):
            super().handle_reply(message)  # type: ignore[misc]
            return
        transport.hold()
        try:
            super().handle_reply(message)  # type: ignore[misc]
        finally:
            transport.release()


# --- http_module -----------------------------------------------------------------


def _check_http_module() -> list[str]:
    from daphne import http_protocol
    from twisted.python import deprecate

    problems = _missing(deprecate, "_ModuleProxy")
    if problems:
        return problems
    if not isinstance(http_protocol.http, deprecate._ModuleProxy):
        problems.append("daphne.http_protocol.http is not behind Twisted's _ModuleProxy")
    problems += _unset_by(deprecate._ModuleProxy.__init__, "_module")
    return problems


def _build_http_module(active: set[str]) -> list[tuple[Any, str, Any]]:
    # daphne reaches ``twisted.web.http`` (``http.Request.__init__``,
    # ``.finish``, ``.write``, ...) through Twisted's deprecation proxy for
    # that module: a Python ``__getattribute__`` per look-up, several per
    # request. The names are the module's own; daphne gets the module.
    from daphne import http_protocol

    return [(http_protocol, "http", object.__getattribute__(http_protocol.http, "_module"))]


# --- chunk_fast_path -------------------------------------------------------------


def _check_chunk_fast_path() -> list[str]:
    from daphne import http_protocol

    return _unset_by(http_protocol.WebRequest.__init__, "_response_started") + _unset_by(
        http_protocol.WebRequest.handle_reply, "_response_started", "write", "finished"
    )


def _chunk_fast_path() -> type:
    from twisted.web.http import Request

    write_body: Any = Request.write

    class ChunkFastPath:
        channel: Any
        finished: int
        _response_started: bool

        def handle_reply(self, message: dict) -> None:
            # A stream's next chunk, the message sent per backend read,
            # written without daphne's checks for the other kinds of message.
            if (
                message.get("more_body")
                and message.get("type") == "http.response.body"
                and self._response_started
                and not self.finished
                and self.channel is not None
            ):
                write_body(self, message.get("body", b""))
                return
            super().handle_reply(message)  # type: ignore[misc]

    return ChunkFastPath


def _build_nothing(active: set[str]) -> list[tuple[Any, str, Any]]:
    return []  # _build_daphne_factory adds the mixin to its requests


# Checked in this order, so that a patch comes after those it needs; the
# ones that change daphne's request class are built by daphne_factory.
PATCHES = (
    Patch("eager_writes", {"Twisted": TWISTED}, _check_eager_writes, _build_eager_writes),
    Patch(
        "http_module",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_http_module,
        _build_http_module,
    ),
    Patch(
        "daphne_factory",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_daphne_factory,
        _build_daphne_factory,
    ),
    Patch(
        "first_bytes_together",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_first_bytes_together,
        _build_nothing,
        needs=("eager_writes", "daphne_factory"),
    ),
    Patch(
        "chunk_fast_path",
        {"Twisted": TWISTED, "daphne": DAPHNE},
        _check_chunk_fast_path,
        _build_nothing,
        needs=("daphne_factory",),
    ),
)
NAMES = tuple(p.name for p in PATCHES)


def selected(spec: str | None) -> set[str]:
    """The names ``SWITCHYARD_SERVER_PATCHES`` asks for (see the module's docstring)."""
    spec = (spec or "all").strip()
    if spec == "all":
        return set(NAMES)
    if spec == "none":
        return set()
    items = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in items if s.lstrip("-") not in NAMES]
    if unknown:
        raise ValueError(
            f"{ENV}: unknown patch {', '.join(unknown)}; known: all, none, {', '.join(NAMES)}"
        )
    removed = {s[1:] for s in items if s.startswith("-")}
    added = {s for s in items if not s.startswith("-")}
    if removed and added:
        raise ValueError(f"{ENV}: either names or -names, not both")
    return set(NAMES) - removed if removed else added


def apply(spec: str | None) -> list[str]:
    """Apply the patches ``spec`` selects that check out; returns their names.

    The patches left out because their versions or attributes differ are
    named in one warning; one that needs a patch left out is left out too.
    """
    wanted = selected(spec)
    active: set[str] = set()
    left_out = []
    for patch in PATCHES:
        if patch.name not in wanted:
            continue
        problems = patch.problems()
        unmet = [n for n in patch.needs if n not in active]
        if unmet and not problems:
            if all(n not in wanted for n in unmet):
                continue  # switched off with what it needs
            problems = [f"needs {', '.join(unmet)}"]
        if problems:
            left_out.append(f"{patch.name} ({'; '.join(problems)})")
            continue
        active.add(patch.name)
    if left_out:
        logger.warning("Server patches not applied, stock behaviour kept: %s", ", ".join(left_out))
    for patch in PATCHES:
        if patch.name in active:
            for owner, attribute, value in patch.build(active):
                setattr(owner, attribute, value)
    names = [n for n in NAMES if n in active]
    logger.info("Server patches: %s", ", ".join(names) or "none")
    return names
