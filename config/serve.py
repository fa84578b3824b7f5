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
- Patches of Twisted's and daphne's internals (``config/patches.py``,
  which says what each does and saves) are applied before the reactor
  runs, each only if the versions and attributes it was written for are
  there: ``daphne_factory`` (no form parsing and no Twisted access log
  line), ``eager_writes`` (writes leave at once), ``http_module`` (daphne
  skips Twisted's deprecation proxy) and ``websocket_writes`` (a socket's
  frames leave in one write per loop turn, and a client that stops reading
  them is held to what an HTTP client is held to); bench/README.md, 28.,
  has what each saves. Two more bound what a client
  can make the process hold: ``backpressure`` (a response's ``send`` waits
  while the client does not read, and a client that reads nothing for
  ``SWITCHYARD_CLIENT_STALL_SECONDS`` is disconnected) and
  ``header_timeout`` (a request head not complete within
  ``SWITCHYARD_HEADER_TIMEOUT_SECONDS`` closes its connection).
  ``SWITCHYARD_SERVER_PATCHES=none`` serves with stock daphne and Twisted.
  In production (``SWITCHYARD_PRODUCTION``) a patch that bounds what a
  client can hold and cannot be applied stops the start, unless that
  variable drops it: only a warning would say its bound is gone.
- WebSockets (WebSocket mode of ``/v1/responses``): permessage-deflate is
  accepted when a client offers it (autobahn's ``setProtocolOptions``; daphne
  leaves it off), a frame may be as large as a request body
  (``SWITCHYARD_MAX_BODY_BYTES``, unless ``--websocket-max-message-size`` or
  ``--websocket-max-frame-size`` is given; daphne's default is 1 MiB), and
  one over that, decoded, gets an error frame and close 4413
  (``config/websocket_sizes.py``) where stock autobahn closes with 1009.
- pyOpenSSL is not loaded unless daphne is given a TLS endpoint
  (``-e ssl:…``): TLS ends at the reverse proxy, and Twisted, which loads
  it for TLS on its own sockets whenever it is installed, serves plain TCP
  without it, which saves memory in every process (bench/README.md, 35.).

The event loop's lag and the cyclic collector's pauses are measured
(``responses_api/runtime/loop_monitor.py``) and exported in ``/metrics``.

The first two use public interfaces: the event-loop policy, and daphne's
``CommandLineInterface.server_class`` with ``Server``'s ``action_logger``.
TCP_NODELAY needs nothing: Twisted sets it on every connection.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvloop

from config import patches
from config.declared.environment import read


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    spec = read(patches.ENV)
    try:
        patches.selected(spec)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    skip_tls_libraries(argv)

    from daphne import server
    from daphne.cli import CommandLineInterface

    access_log = any(a == "--access-log" or a.startswith("--access-log=") for a in argv)
    sized = any(a.startswith("--websocket-max-") for a in argv)

    class Server(server.Server):
        def __init__(self, *args, action_logger=None, ready_callable=None, **kwargs) -> None:
            def ready() -> None:
                # Daphne has made the reactor's loop the current one and is
                # about to run it: measure its lag from now on.
                from responses_api.runtime import loop_monitor

                loop_monitor.install(asyncio.get_event_loop())
                # Autobahn accepts no compression unless told to; WebSocket
                # mode's clients (Codex) offer permessage-deflate.
                self.ws_factory.setProtocolOptions(perMessageCompressionAccept=accept_deflate)
                answer_oversize(self.ws_factory)
                if ready_callable is not None:
                    ready_callable()

            super().__init__(
                *args,
                action_logger=action_logger if access_log else None,
                ready_callable=ready,
                **kwargs,
            )

        def run(self) -> None:
            # Here daphne has configured logging and imported the
            # application, so a patch's warning reaches the process's log.
            from django.conf import settings

            try:
                patches.apply(spec, production=settings.PRODUCTION)
            except patches.Refused as refused:
                raise SystemExit(str(refused)) from None
            if not sized:
                # A response.create frame is a request body: the same cap.
                cap = settings.SWITCHYARD_MAX_BODY_BYTES
                self.websocket_max_message_size = self.websocket_max_frame_size = cap
            super().run()

    class Cli(CommandLineInterface):
        server_class = Server

    Cli().run(argv)


def answer_oversize(factory: Any) -> None:
    """A message over the size cap gets its error frame and close 4413
    (``config/websocket_sizes.py``), on the protocol the factory makes,
    patched or stock; without autobahn's hook, its close 1009 stays."""
    import logging

    from config import websocket_sizes

    problems = websocket_sizes.check(factory.protocol)
    if problems:
        logging.getLogger("switchyard.server").warning(
            "WebSocket messages over the size cap are closed with 1009 only: %s",
            "; ".join(problems),
        )
        return
    factory.protocol = websocket_sizes.answering(factory.protocol)


def accept_deflate(offers: list[Any]) -> Any:
    """permessage-deflate for a client that offers it (RFC 7692), with the
    parameters it asked for; None (no compression) otherwise."""
    from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(offer)
    return None


def skip_tls_libraries(argv: list[str]) -> bool:
    """Keep pyOpenSSL (and the X.509 and service-identity modules it brings)
    out of a server that serves no TLS itself; True when kept out.

    Twisted imports it in a ``try``, and on ImportError leaves its sockets
    without TLS: a ``None`` entry in ``sys.modules`` is what makes an import
    fail. Any argument naming an ``ssl:`` endpoint keeps it, as does a
    process that has loaded it already. Must run before daphne is imported.
    """
    if "OpenSSL" in sys.modules or any("ssl:" in arg for arg in argv):
        return False
    sys.modules["OpenSSL"] = None  # type: ignore[assignment]
    return True


if __name__ == "__main__":
    main()
