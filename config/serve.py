"""Start daphne for Switchyard.

    python -m config.serve [daphne's options] config.asgi:application


Every option of the ``daphne`` command works unchanged. What differs, each
measured by the benchmark (bench/README.md):

- The event loop is uvloop's. Daphne creates its loop when ``daphne.server``
  is imported, from the current event-loop policy, so the policy is set
  before that import (the ``daphne`` command offers no way to). Twisted's
  asyncio reactor runs on it unchanged.
- Daphne's access log is off unless ``--access-log`` is given: every API
  request already logs one structured line (``switchyard.requests``), and a
  second line per request costs a formatted write (put the access log of the
  console's pages on the reverse proxy, or pass ``--access-log -``).
- A write to a client's socket is sent at once when nothing is queued
  before it, instead of from the reactor's next turn (``_eager_transport``).
- Twisted's own access log, which daphne formats for every request and then
  discards, is not formatted, and neither is a POST's ``Content-Type``, which
  Twisted parses to decode HTML forms that daphne never reads.
"""

from __future__ import annotations

import asyncio
import sys

import uvloop


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    from daphne import http_protocol, server
    from daphne.cli import CommandLineInterface
    from twisted.internet import tcp
    from twisted.web.http import Request

    write_body = Request.write
    Eager = _eager_transport(tcp.Server)
    # daphne reaches ``twisted.web.http`` (``http.Request.__init__``,
    # ``.finish``, ``.write``, ...) through Twisted's deprecation proxy for
    # that module: a Python ``__getattribute__`` per look-up, several per
    # request. Its names are the module's own; daphne gets the module.
    http_protocol.http = _unproxied(http_protocol.http)

    access_log = any(a == "--access-log" or a.startswith("--access-log=") for a in argv)

    class WebRequest(http_protocol.WebRequest):
        def __init__(self, *args, **kwargs) -> None:
            # Twisted parses a POST's Content-Type with the email package to
            # decode HTML forms into ``request.args``, which daphne never
            # reads (the ASGI app gets the raw body): 7 % of the CPU time of
            # a request through Switchyard.
            super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

        def handle_reply(self, message) -> None:
            # The first body message sends the status line and headers, then
            # the data (and, for a whole answer, the end): held together they
            # leave in one system call instead of two or three.
            transport = getattr(self.channel, "transport", None)
            if self.startedWriting or not isinstance(transport, Eager):
                self._reply(message)
                return
            transport.hold()
            try:
                self._reply(message)
            finally:
                transport.release()

        def _reply(self, message) -> None:
            # A stream's next chunk, the message sent per backend read:
            # daphne's own branch reaches Twisted's ``Request.write`` through
            # ``twisted.web.http``'s deprecation proxy, a module-attribute
            # lookup that cost 5 % of a paced stream's CPU time.
            if (
                message.get("more_body")
                and message.get("type") == "http.response.body"
                and self._response_started
                and not self.finished
                and self.channel is not None
            ):
                write_body(self, message.get("body", b""))
                return
            super().handle_reply(message)

    class HTTPFactory(http_protocol.HTTPFactory):
        def buildProtocol(self, addr):
            protocol = super().buildProtocol(addr)
            protocol.requestFactory = WebRequest
            return protocol

        def log(self, request) -> None:
            """Twisted's access log line: daphne keeps its own."""

    class Server(server.Server):
        def __init__(self, *args, action_logger=None, **kwargs) -> None:
            super().__init__(*args, action_logger=action_logger if access_log else None, **kwargs)

    class Cli(CommandLineInterface):
        server_class = Server

    # ``Server.run`` builds its factory from this module-level name, and
    # Twisted's ports their connections' transport from this attribute.
    server.HTTPFactory = HTTPFactory
    tcp.Port.transport = Eager
    Cli().run(argv)


def _unproxied(module):
    """The module behind a ``twisted.python.deprecate`` module proxy."""
    from twisted.python.deprecate import _ModuleProxy

    if isinstance(module, _ModuleProxy):
        return object.__getattribute__(module, "_module")
    return module


def _eager_transport(base):
    """A Twisted TCP transport that sends a write at once when nothing is
    waiting to be sent before it, as asyncio's transports do.

    Twisted queues every write and sends it from the reactor's next turn:
    two registrations with the event loop (``add_writer``, then
    ``remove_writer``), a turn of the loop and its logging context per
    write, which is per token on a slowly streamed answer. Anything not
    sent at once (a full socket buffer, an error) takes Twisted's own path,
    which also handles flow control and connection loss.
    """

    class Eager(base):
        held: list[bytes] | None = None
        no_delay = False

        def setTcpNoDelay(self, enabled) -> None:
            # The API sets it on every request (``consumers._no_delay``); a
            # kept-alive connection needs the system call once.
            if bool(enabled) != self.no_delay:
                super().setTcpNoDelay(enabled)
                self.no_delay = bool(enabled)

        def hold(self) -> None:
            """Collect writes until :meth:`release`, then send them as one."""
            self.held = []

        def release(self) -> None:
            held, self.held = self.held, None
            if held:
                self.writeSequence(held)

        def write(self, data: bytes) -> None:
            self.writeSequence((data,))

        def writeSequence(self, iovec) -> None:
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


if __name__ == "__main__":
    main()
