"""The API's routes (SPEC §4.1), behind :class:`consumers.ApiConsumer`."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson

from responses_api.auth import authenticate, key_from_headers
from responses_api.catalog import get_catalog
from responses_api.errors import ApiError
from responses_api.relay import Exchange, Responder, scope_headers, serve

_STORED = re.compile(r"^/responses/([^/]+)(/input_items)?/?$")


def _not_found(route: str) -> ApiError:
    return ApiError(
        404,
        f"Unknown request URL: {route}. See /api/v1/docs for the API's routes.",
        code="unknown_url",
    )


async def dispatch(
    scope: dict[str, Any], route: str, body: bytes, responder: Responder, exchange: Exchange
) -> None:
    method = scope.get("method", "GET")
    if route in ("/responses", "/responses/"):
        if method != "POST":
            await responder.error(_method_not_allowed(method, b"POST"))
            return
        await serve(scope, body, responder, exchange)
        return
    if route in ("/models", "/models/"):
        if method != "GET":
            await responder.error(_method_not_allowed(method, b"GET"))
            return
        await _authenticated(scope, responder, exchange, _list_models)
        return
    if route in ("/responses/compact", "/responses/input_tokens"):
        await responder.error(
            ApiError(404, f"{route} is not served by this server.", code="unknown_url")
        )
        return
    if stored := _STORED.match(route):
        allowed = (b"GET",) if stored.group(2) else (b"GET", b"DELETE")
        if method.encode() not in allowed:
            await responder.error(_method_not_allowed(method, b", ".join(allowed)))
            return
        await _authenticated(scope, responder, exchange, _stored_response)
        return
    await responder.error(_not_found(route))


def _method_not_allowed(method: str, allow: bytes) -> ApiError:
    return ApiError(
        405,
        f"Method {method} is not allowed here.",
        code="method_not_allowed",
        headers=[(b"allow", allow)],
    )


async def _authenticated(scope, responder: Responder, exchange: Exchange, handler) -> None:
    """Authenticate, run ``handler``, and leave one usage row."""
    headers = scope_headers(scope)
    client = scope.get("client")
    exchange.client_ip = client[0] if client else None
    exchange.user_agent = headers.get(b"user-agent", b"").decode("latin-1")[:300]
    try:
        exchange.caller = await authenticate(key_from_headers(headers))
    except ApiError as error:
        await responder.error(error)
        return
    try:
        status, payload = await handler(scope, exchange)
        exchange.status = status
        await exchange.submit()
        await responder.json(status, orjson.dumps(payload))
    except ApiError as error:
        exchange.fail(error)
        await exchange.submit()
        await responder.error(error)
    except asyncio.CancelledError:
        exchange.status, exchange.note = 499, "Client disconnected"
        await asyncio.shield(exchange.submit())
        raise


async def _list_models(scope, exchange: Exchange) -> tuple[int, dict[str, Any]]:
    caller = exchange.caller
    assert caller is not None
    catalog = await get_catalog(caller.organisation_id)
    data = [
        {
            "id": m.public_id,
            "object": "model",
            "created": m.created_at,
            "owned_by": caller.organisation_slug,
        }
        for m in catalog.models
        if m.routes and (not caller.allowed_models or m.public_id in caller.allowed_models)
    ]
    return 200, {"object": "list", "data": data}


async def _stored_response(scope, exchange: Exchange) -> tuple[int, dict[str, Any]]:
    caller = exchange.caller
    assert caller is not None
    if caller.retention_policy != "store":
        raise ApiError(
            404,
            "Responses are not stored for this organisation (zero data retention), "
            "so there is nothing to retrieve or delete.",
            code="response_not_found",
        )
    raise ApiError(404, "No response with this id was found.", code="response_not_found")
