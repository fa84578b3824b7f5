"""The API's routes: the one table that says which paths the API serves and
how its OpenAPI document (``openapi.py``) describes each of them.

Every route is served under both :data:`PREFIXES`. The ASGI router
(``config/asgi.py``) sends every path under them to the API's consumer, except
:data:`PAGES` (the schema and docs pages, which are Django views) and the
management API under :data:`DJANGO_PREFIX` (Django REST framework); the
consumer resolves the rest here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from responses_api.api.compaction import compact_response, count_input_tokens
from responses_api.api.conversations import CONVERSATION_OPERATIONS
from responses_api.api.embeddings import create_embeddings
from responses_api.api.endpoints import (
    delete_response,
    list_input_items,
    list_models,
    not_served,
)
from responses_api.api.files import FILE_OPERATIONS
from responses_api.api.vector_store_routes import VECTOR_STORE_OPERATIONS
from responses_api.background.handlers import cancel, create, retrieve
from responses_api.pipeline.call import RESPONSES, Handler
from responses_api.protocol.errors import ApiError

# A schema of a body: the name of one in the document's components, or inline.
Schema = str | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Operation:
    """One method of a route. Without an ``operation_id`` it is answered but
    left out of the document: paths of OpenAI's API this server refuses."""

    handler: Handler
    operation_id: str = ""
    summary: str = ""
    description: str | None = None
    request: str | None = None  # the schema of the request body
    request_media: str = "application/json"
    answer: str = ""  # what the 200 answer is
    content: Mapping[str, Schema] = field(default_factory=dict)  # of the 200, by media type
    errors: tuple[int, ...] = ()  # the error statuses it may answer
    # Specification extensions (``x-…``) of the operation, as they are.
    extensions: Mapping[str, Any] = field(default_factory=dict)
    # The handler reads the body itself, as it arrives (``Call.upload``).
    streams_body: bool = False


PARAMETER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class Route:
    path: str  # ``{name}`` is a path parameter: one segment
    methods: Mapping[str, Operation]  # ``"*"``: any method

    def pattern(self) -> re.Pattern[str]:
        regex = PARAMETER.sub(r"(?P<\1>[^/]+)", self.path)
        return re.compile(f"^{regex}/?$")

    def parameters(self) -> list[str]:
        return PARAMETER.findall(self.path)

    def described(self) -> dict[str, Operation]:
        """Its operations that the OpenAPI document describes, by method."""
        return {method: op for method, op in self.methods.items() if op.operation_id}


REFUSED = Operation(not_served)


def _stored(
    handler: Handler, operation_id: str, summary: str, *, answer: str, schema: Schema
) -> Operation:
    """An operation on a stored response: one only organisations that store
    responses have, all others getting the 404 of an unknown response."""
    return Operation(
        handler,
        operation_id,
        summary,
        "Only for organisations whose retention policy stores responses; otherwise 404.",
        answer=answer,
        content={"application/json": schema},
        errors=(401, 404),
    )


def _conversation(
    handler: Handler,
    operation_id: str,
    summary: str,
    answer: str,
    schema: Schema,
    request: str = "",
) -> Operation:
    """An operation of the Conversations API, which organisations that store
    responses have; the others get a 400 (create) or the 404 of an unknown id."""
    return Operation(
        handler,
        operation_id,
        summary,
        "Only for organisations whose retention policy stores responses; otherwise a 400 "
        "(create) or 404. Another organisation's id answers as an unknown one.",
        request=request or None,
        answer=answer,
        content={"application/json": schema},
        errors=(400, 401, 404, 415) if request else (400, 401, 404),
    )


CONVERSATION_ROUTES = tuple(
    Route(path, {method: _conversation(*spec) for method, spec in methods.items()})
    for path, methods in CONVERSATION_OPERATIONS.items()
)

# The Files API (docs/api/files.md).
FILE_ROUTES = tuple(
    Route(path, {method: Operation(**spec) for method, spec in methods.items()})
    for path, methods in FILE_OPERATIONS.items()
)

# The Vector stores API (docs/api/vector-stores.md).
VECTOR_STORE_ROUTES = tuple(
    Route(path, {method: Operation(**spec) for method, spec in methods.items()})
    for path, methods in VECTOR_STORE_OPERATIONS.items()
)


# WebSocket mode, which OpenAPI cannot describe as an operation: the upgrade
# of GET /responses (docs/api/websocket.md).
WEBSOCKET_MODE: Mapping[str, Any] = {
    "summary": "Create responses over one WebSocket (GET /responses, upgraded)",
    "description": (
        "Connect with the key in `Authorization: Bearer`. Send text frames "
        '`{"type": "response.create", ...}` holding a `CreateResponse` body (`stream` '
        "implied, `background` refused; `generate: false` creates a response without "
        "running the model, to start a chain). Each event of the answer comes back as one "
        "text frame, the `StreamEvent` an SSE `data:` line would hold. `previous_response_id` "
        "naming the socket's last response continues it without the store, also in an "
        'organisation that stores nothing. Errors are frames `{"type": "error", '
        '"status": <HTTP status>, "error": {...}}`. A socket lives at most 60 minutes, '
        "then gets `websocket_connection_limit_reached` and is closed."
    ),
    "headers": {"OpenAI-Beta": "responses_websockets=2026-02-06 (optional)"},
    "clientFrames": {"response.create": {"$ref": "#/components/schemas/CreateResponse"}},
    "serverFrames": {"$ref": "#/components/schemas/StreamEvent"},
}

ROUTES: tuple[Route, ...] = (
    Route(
        RESPONSES,
        {
            "POST": Operation(
                create,
                "createResponse",
                "Create a response (JSON, or Server-Sent Events with stream: true)",
                description=(
                    "With `background: true` (organisations that store responses only; "
                    "otherwise a 400) the response is queued and answered at once with "
                    "`status: queued`, or with `stream: true` its events are followed as "
                    "they come; it runs on a worker. The same bodies can be sent over one "
                    "WebSocket (WebSocket mode, `x-websocket`)."
                ),
                extensions={"x-websocket": WEBSOCKET_MODE},
                request="CreateResponse",
                answer=(
                    "The response; with `stream: true` an event stream of "
                    "`response.*` events ending in `response.completed`, "
                    "`response.incomplete` or `response.failed`."
                ),
                content={
                    "application/json": "Response",
                    # OpenAPI 3.1: for an event stream, the schema of one event.
                    "text/event-stream": "StreamEvent",
                },
                errors=(400, 401, 403, 404, 413, 415, 429, 502, 503, 504),
            )
        },
    ),
    Route(
        "/models",
        {
            "GET": Operation(
                list_models,
                "listModels",
                "The organisation's models that have a backend",
                answer="The models, in OpenAI's list format.",
                content={"application/json": "ModelList"},
                errors=(401,),
            )
        },
    ),
    Route(
        "/embeddings",
        {
            "POST": Operation(
                create_embeddings,
                "createEmbedding",
                "Create embeddings of texts or token ids",
                "Served by the organisation's embedding models (`kind: embed`); a generation "
                "model is a 400. `encoding_format: base64` gives little-endian float32 bytes. "
                "Counts under the rate and spend limits like a response; one usage row each.",
                request="CreateEmbeddingRequest",
                answer="The embeddings, in OpenAI's `CreateEmbeddingResponse` shape.",
                content={"application/json": "CreateEmbeddingResponse"},
                errors=(400, 401, 403, 404, 413, 415, 429, 502, 503, 504),
            )
        },
    ),
    Route(
        "/responses/compact",
        {
            "POST": Operation(
                compact_response,
                "compactResponse",
                "Compact a conversation into its user messages and one compaction item",
                "The backend summarises the conversation (`input`, after "
                "`previous_response_id`'s chain) with the same model; the summary is "
                "sealed in the compaction item's `encrypted_content`, for this "
                "organisation and model. Send the output back as the next request's input.",
                request="CompactResponse",
                answer="The compacted conversation.",
                content={"application/json": "CompactedResponse"},
                errors=(400, 401, 403, 404, 413, 415, 429, 502, 503, 504),
            )
        },
    ),
    Route(
        "/responses/input_tokens",
        {
            "POST": Operation(
                count_input_tokens,
                "countInputTokens",
                "Count the input tokens of a response request",
                "Counted by the model's backend where it has a tokenizer endpoint "
                "(vLLM, llama.cpp), else estimated as a quarter of the chat request's "
                "JSON bytes. Counts as one request under the requests-per-minute limits; "
                "holds no spend.",
                request="CountInputTokens",
                answer="The count.",
                content={"application/json": "InputTokens"},
                errors=(400, 401, 403, 404, 413, 415, 429, 502, 503),
            )
        },
    ),
    Route(
        "/responses/{response_id}",
        {
            "GET": Operation(
                retrieve,
                "getResponse",
                "Retrieve a stored response, or replay a background response's events",
                "Only for organisations whose retention policy stores responses; otherwise "
                "404. Query: `stream=true` replays a background response's events as "
                "Server-Sent Events and follows them to the end, from the event after "
                "`starting_after` (a `sequence_number`).",
                answer="The stored response, or its events.",
                content={"application/json": "Response", "text/event-stream": "StreamEvent"},
                errors=(400, 401, 404),
            ),
            "DELETE": _stored(
                delete_response,
                "deleteResponse",
                "Delete a stored response",
                answer="Deleted.",
                schema={"type": "object"},
            ),
        },
    ),
    Route(
        "/responses/{response_id}/cancel",
        {
            "POST": Operation(
                cancel,
                "cancelResponse",
                "Cancel a background response",
                "Only responses created with `background: true`; another is a 400, as "
                "is one that has already ended (a cancelled one is answered again).",
                answer="The response, cancelled.",
                content={"application/json": "Response"},
                errors=(400, 401, 404),
            )
        },
    ),
    Route(
        "/responses/{response_id}/input_items",
        {
            "GET": _stored(
                list_input_items,
                "listInputItems",
                "The input items of a stored response",
                answer="The input items, in OpenAI's list format.",
                schema={"type": "object"},
            )
        },
    ),
    *CONVERSATION_ROUTES,
    *FILE_ROUTES,
    *VECTOR_STORE_ROUTES,
)

PREFIXES = ("/api/v1", "/v1")
PREFIX = re.compile(r"^/(?:api/)?v1(?=/|$)")


@dataclass(frozen=True, slots=True)
class Page:
    """A path under the API's prefixes that a Django view serves (``config/urls.py``)."""

    path: str
    slash: bool  # whether a trailing slash finds it too

    def url_pattern(self) -> str:
        """Its ``re_path`` regex, under either prefix."""
        return rf"^(?:api/)?v1{re.escape(self.path)}{'/?' if self.slash else ''}$"


SCHEMA_PAGE = Page("/openapi.json", slash=False)
DOCS_PAGE = Page("/docs", slash=True)
PAGES = (SCHEMA_PAGE, DOCS_PAGE)
# The management API (``admin_api``), served by Django under this prefix only.
DJANGO_PREFIX = "/api/v1/admin"

_COMPILED = tuple((route, route.pattern()) for route in ROUTES)
_RESPONSES = next(pattern for route, pattern in _COMPILED if route.path == RESPONSES)


def asgi_pattern() -> str:
    """The path regex (``re_path`` style, no leading slash) of everything the
    API's consumer serves."""
    django = "|".join(re.escape(page.path.lstrip("/")) + "/?$" for page in PAGES)
    management = re.escape(DJANGO_PREFIX.lstrip("/"))
    return rf"^(?!{management}(?:/|$))(?:api/)?v1(?:$|/(?!(?:{django})))"


@dataclass(frozen=True, slots=True)
class Match:
    endpoint: str  # the path under the prefix, as the usage row records it
    handler: Handler | None
    params: dict[str, str]
    error: ApiError | None  # 404 or 405 when there is no handler
    streams_body: bool = False


def creates_responses(path: str) -> bool:
    """Whether ``path`` is the create-response route under either prefix: the
    one path a WebSocket is answered on."""
    prefix = PREFIX.match(path)
    return prefix is not None and _RESPONSES.match(path[prefix.end() :]) is not None


def resolve(path: str, method: str) -> Match:
    prefix = PREFIX.match(path)
    endpoint = (path[prefix.end() :] or "/") if prefix else path
    for route, pattern in _COMPILED:
        found = pattern.match(endpoint)
        if found is None:
            continue
        operation = route.methods.get(method) or route.methods.get("*")
        if operation is None:
            allowed = ", ".join(route.methods)
            return Match(endpoint, None, {}, _method_not_allowed(method, allowed))
        return Match(endpoint, operation.handler, found.groupdict(), None, operation.streams_body)
    return Match(endpoint, None, {}, _not_found(endpoint))


def _not_found(endpoint: str) -> ApiError:
    return ApiError(
        404,
        f"Unknown request URL: {endpoint}. See {PREFIXES[0]}{DOCS_PAGE.path} for the API's routes.",
        code="unknown_url",
    )


def _method_not_allowed(method: str, allow: str) -> ApiError:
    return ApiError(
        405,
        f"Method {method} is not allowed here.",
        code="method_not_allowed",
        headers=[(b"allow", allow.encode())],
    )
