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

    access_log = any(a == "--access-log" or a.startswith("--access-log=") for a in argv)

    class WebRequest(http_protocol.WebRequest):
        def __init__(self, *args, **kwargs) -> None:
            # Twisted parses a POST's Content-Type with the email package to
            # decode HTML forms into ``request.args``, which daphne never
            # reads (the ASGI app gets the raw body): 7 % of the CPU time of
            # a request through Switchyard.
            super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

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

    # ``Server.run`` builds its factory from this module-level name.
    server.HTTPFactory = HTTPFactory
    Cli().run(argv)


if __name__ == "__main__":
    main()
