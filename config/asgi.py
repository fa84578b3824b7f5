"""ASGI entry point: the API on Channels consumers, everything else on Django."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from responses_api import draining, routes  # noqa: E402
from responses_api.consumers import ApiConsumer  # noqa: E402

# Under daphne, SIGTERM drains the open exchanges before the process stops.
draining.install()

application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                # Every path the API's route table serves.
                re_path(routes.asgi_pattern(), ApiConsumer.as_asgi()),
                re_path(r"", django_application),
            ]
        ),
    }
)

# Everything loaded so far lives as long as the process: move it out of the
# cyclic collector's sight, so that collections triggered by requests' short-
# lived objects don't traverse Django's and every library's module state.
gc.freeze()
