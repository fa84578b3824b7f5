"""ASGI entry point: the API on Channels consumers, everything else on Django."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

import re  # noqa: E402
from typing import Any  # noqa: E402

from channels.routing import ProtocolTypeRouter  # noqa: E402

from config.guard import guarded  # noqa: E402
from responses_api.edge import routes  # noqa: E402
from responses_api.edge.http import ApiConsumer, Receive, Send  # noqa: E402
from responses_api.edge.websocket import ResponsesSocket  # noqa: E402
from responses_api.pipeline import draining  # noqa: E402
from responses_api.runtime import telemetry  # noqa: E402

# Under daphne, SIGTERM drains the open exchanges before the process stops.
draining.install()
# Traces when an OTLP endpoint is configured (docs/operations/traces.md).
telemetry.install()

api_application = ApiConsumer()
_API_PATHS = re.compile(routes.asgi_pattern())


async def http_application(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Every path the API's route table serves goes to the API; the rest
    (console, admin, health, metrics, the API's docs) to Django."""
    if _API_PATHS.match(scope["path"].lstrip("/")):
        # Guards itself (consumers.ApiConsumer), without a wrapper per send.
        await api_application(scope, receive, send)
    else:
        await guarded_django(scope, receive, send)


guarded_django = guarded(django_application)
# WebSocket mode of /v1/responses (docs/api/websocket.md); the socket
# refuses any other path with an error frame.
application = ProtocolTypeRouter({"http": http_application, "websocket": ResponsesSocket()})

# Everything loaded so far lives as long as the process: move it out of the
# cyclic collector's sight, so that collections triggered by requests' short-
# lived objects don't traverse Django's and every library's module state.
gc.freeze()

# Collect the youngest generation after 5,000 allocations, not Python's 700.
# A request allocates a few thousand container objects, nearly all dead by its
# end; at 700, with 32 requests in flight, each collection finds the live ones
# of every other request and promotes them, and the older generations fill
# with what was about to die. Measured (bench/README.md, "Round two"): at
# 5,000 far fewer collections hold the loop, for less time in all, with the
# same RSS; higher still, each young collection takes longer and the process
# grows.
GC_THRESHOLDS = (5_000, 10, 10)
gc.set_threshold(*GC_THRESHOLDS)
