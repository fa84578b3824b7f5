"""The body limits of an upload (``POST /v1/files``) under daphne.

Twisted receives a whole body before daphne calls the application
(``patches._BodyLimits``). An upload may be larger than other bodies, up to
``SWITCHYARD_FILES_MAX_BYTES`` (Twisted keeps a body past 100 kB in a
temporary file, not in memory), within ``SWITCHYARD_FILES_UPLOAD_TIMEOUT_SECONDS``.
One past its cap is not refused by Twisted, which would leave no usage row:
the request is handed to the application at once, with what arrived of the
body and the header :data:`REFUSED`, and the application authenticates it
and answers 413 (``api/files.py``) with its row. The connection is then
closed, and the rest of the body is dropped as it arrives. The header is
removed from every request a client sends, so only the server sets it.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

REFUSED = b"x-switchyard-body-refused"
_UPLOAD = re.compile(rb"^/(?:api/)?v1/files/?(?:\?|$)")


def is_upload(channel: Any) -> bool:
    """Whether the request the channel is reading is an upload (Twisted
    keeps its request line on the channel until the body is complete)."""
    path = getattr(channel, "_path", b"")
    return getattr(channel, "_command", b"") == b"POST" and bool(_UPLOAD.match(path or b""))


def body_cap(upload: bool) -> int:
    """The bytes a body may have: an upload's file and its form around it, or any other's."""
    from responses_api.files.upload import OVERHEAD

    if upload:
        return settings.SWITCHYARD_FILES_MAX_BYTES + OVERHEAD
    return settings.SWITCHYARD_MAX_BODY_BYTES


def body_seconds(upload: bool) -> float:
    if upload:
        return settings.SWITCHYARD_FILES_UPLOAD_TIMEOUT_SECONDS
    return settings.SWITCHYARD_BODY_TIMEOUT_SECONDS


def mark_refused(request: Any) -> tuple[bytes, bytes, bytes]:
    """Mark ``request`` as an upload past its cap, to be answered and its
    connection closed; the request line to hand it over with."""
    request.requestHeaders.setRawHeaders(REFUSED, [b"413"])
    request.requestHeaders.setRawHeaders(b"connection", [b"close"])
    channel = request.channel
    # Closed once answered: what follows on it is the rest of this body.
    channel.persistent = False
    return channel._command, channel._path, channel._version
