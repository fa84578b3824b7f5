"""What a route's handler is given: one request, as the consumer read it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from responses_api.pipeline.exchange import Exchange
from responses_api.pipeline.responder import Responder

if TYPE_CHECKING:
    from responses_api.pipeline.writers import EventWriter
    from responses_api.protocol.errors import ApiError
    from responses_api.store.continuation import Keep
    from responses_api.translate.request import ChatPlan
    from responses_api.translate.stream import StreamTranslator

# The create-response route's path under the API's prefixes, for the route
# table, WebSocket mode and a background run's row alike.
RESPONSES = "/responses"


@dataclass(slots=True)
class Output:
    """A response being translated from a backend's chat stream. ``writer``
    numbers a stream's events; a JSON answer has none. ``keep``, when the
    response is stored: the ending saves it before the client is told the
    response ended."""

    translator: StreamTranslator
    plan: ChatPlan
    writer: EventWriter | None = None
    keep: Keep | None = None


@dataclass(slots=True)
class Call:
    exchange: Exchange
    responder: Responder
    headers: dict[bytes, bytes]
    body: bytes = b""
    params: dict[str, str] = field(default_factory=dict)
    query_string: bytes = b""
    # Set by a handler once it translates a backend's answer: the ending
    # (``ending.end_exchange``) finishes what it started.
    output: Output | None = None
    # Set when the server cuts the call for a fault of its client's (its
    # WebSocket closed for too many frames): its cancellation then ends it
    # with this error, not as a client gone (499).
    cut_by: ApiError | None = None
    # A route that reads its own body (an upload) gets it here, chunk by
    # chunk as it arrives, instead of in ``body``.
    upload: AsyncIterator[bytes] | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A handler's JSON answer (a handler that relays an answer returns None),
    or a ``stream`` of ``media_type``: bytes written as they come,
    ``length`` of them in all when known (a file's content, never held
    whole). A stream is an ``attachment`` unless told: a download, never a
    page of this origin."""

    payload: dict[str, Any]
    status: int = 200
    media_type: bytes = b""
    stream: AsyncIterator[bytes] | None = None
    length: int | None = None
    attachment: bool = True


Handler = Callable[[Call], Awaitable[Reply | None]]
