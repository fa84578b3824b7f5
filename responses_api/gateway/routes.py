"""The API's routes: the one table that says which paths the API serves.

Every route is served under both prefixes, ``/v1`` and ``/api/v1``. The
ASGI router (``config/asgi.py``) sends every path under them to the API's
consumer, except :data:`DJANGO_PATHS` (the schema and docs pages, which are
Django views) and the management API under :data:`DJANGO_PREFIX` (Django
REST framework); the consumer resolves the rest here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from responses_api.gateway.call import Handler
from responses_api.gateway.endpoints import (
    delete_response,
    list_input_items,
    list_models,
    not_served,
    retrieve_response,
)
from responses_api.gateway.relay import create_response
from responses_api.protocol.errors import ApiError


@dataclass(frozen=True, slots=True)
class Route:
    path: str  # ``{name}`` is a path parameter: one segment
    methods: dict[str, Handler]  # ``"*"``: any method

    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.path)
        return re.compile(f"^{regex}/?$")


ROUTES: tuple[Route, ...] = (
    Route("/responses", {"POST": create_response}),
    Route("/models", {"GET": list_models}),
    Route("/responses/compact", {"*": not_served}),
    Route("/responses/input_tokens", {"*": not_served}),
    Route("/responses/{response_id}", {"GET": retrieve_response, "DELETE": delete_response}),
    Route("/responses/{response_id}/input_items", {"GET": list_input_items}),
)

# Under the API's prefixes but served by Django (``config/urls.py``).
DJANGO_PATHS = ("/openapi.json", "/docs")
# The management API (``admin_api``), served by Django under this prefix only.
DJANGO_PREFIX = "/api/v1/admin"

PREFIX = re.compile(r"^/(?:api/)?v1(?=/|$)")
_COMPILED = tuple((route, route.pattern()) for route in ROUTES)


def asgi_pattern() -> str:
    """The path regex (``re_path`` style, no leading slash) of everything the
    API's consumer serves."""
    django = "|".join(re.escape(p.lstrip("/")) + "/?$" for p in DJANGO_PATHS)
    management = re.escape(DJANGO_PREFIX.lstrip("/"))
    return rf"^(?!{management}(?:/|$))(?:api/)?v1(?:$|/(?!(?:{django})))"


@dataclass(frozen=True, slots=True)
class Match:
    endpoint: str  # the path under the prefix, as the usage row records it
    handler: Handler | None
    params: dict[str, str]
    error: ApiError | None  # 404 or 405 when there is no handler


def resolve(path: str, method: str) -> Match:
    prefix = PREFIX.match(path)
    endpoint = (path[prefix.end() :] or "/") if prefix else path
    for route, pattern in _COMPILED:
        found = pattern.match(endpoint)
        if found is None:
            continue
        handler = route.methods.get(method) or route.methods.get("*")
        if handler is None:
            allowed = ", ".join(route.methods)
            return Match(endpoint, None, {}, _method_not_allowed(method, allowed))
        return Match(endpoint, handler, found.groupdict(), None)
    return Match(endpoint, None, {}, _not_found(endpoint))


def _not_found(endpoint: str) -> ApiError:
    return ApiError(
        404,
        f"Unknown request URL: {endpoint}. See /api/v1/docs for the API's routes.",
        code="unknown_url",
    )


def _method_not_allowed(method: str, allow: str) -> ApiError:
    return ApiError(
        405,
        f"Method {method} is not allowed here.",
        code="method_not_allowed",
        headers=[(b"allow", allow.encode())],
    )
