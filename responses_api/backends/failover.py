"""Sending a request to a backend, failing over to another (SPEC §5).

A backend that refuses the connection, times out connecting, drops the
connection or answers 5xx/429 *before anything was relayed* is not the
client's problem: the request is tried on another eligible backend, at most
``MAX_ATTEMPTS`` times in all. The usage row records the backend that
answered and the number of tries. Once the answer is being relayed, a failure
ends it (``response.failed`` on a stream), in ``relay.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import httpx
import orjson

from responses_api.backends.client import get_client
from responses_api.backends.routing import Lease, OnWait, affinity_key, router
from responses_api.catalog import ModelEntry, Route
from responses_api.errors import ApiError
from responses_api.protocol import CreateResponse
from responses_api.translate.request import ChatPlan, prepare_chat

if TYPE_CHECKING:
    from responses_api.relay import Exchange

MAX_ATTEMPTS = 3
Relay = Callable[[ChatPlan, httpx.Response], Awaitable[None]]


_RETRYABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


async def forward(
    exchange: Exchange,
    *,
    request: CreateResponse,
    model: ModelEntry,
    pinned: str | None,
    on_wait: OnWait | None,
    relay: Relay,
    planned: ChatPlan | None = None,
) -> None:
    """Lease a backend and ``relay`` its answer. Until a backend has answered,
    a failure is retried on another eligible one (SPEC §5), at most
    ``MAX_ATTEMPTS`` tries; a pinned request is never moved. ``planned`` is
    the request already translated for the model's first route."""
    pinned_id = pinned
    affinity = affinity_key(
        organisation_id=exchange.caller.organisation_id if exchange.caller else 0,
        model_id=model.id,
        prompt_cache_key=request.prompt_cache_key,
        instructions=request.instructions,
        input=request.input,
    )
    tried: set[str] = set()
    last_error: ApiError | None = None
    while exchange.attempts < MAX_ATTEMPTS:
        waiting_since = time.monotonic()
        try:
            lease = await router.acquire(
                model, pinned=pinned_id, affinity=affinity, exclude=tried, on_wait=on_wait
            )
        except (ApiError, asyncio.CancelledError) as error:
            # A 503 after the queue bound, or a client gone while queued: the
            # row still tells how long the request waited.
            waited = (time.monotonic() - waiting_since) * 1000
            exchange.queue_wait_ms = (exchange.queue_wait_ms or 0.0) + waited
            if (
                isinstance(error, ApiError)
                and last_error is not None
                and error.code == "no_backend_available"
            ):
                break  # nothing left to fail over to: report what the backends did
            raise
        exchange.queue_wait_ms = (exchange.queue_wait_ms or 0.0) + lease.queue_wait_ms
        try:
            plan = planned if planned is not None and lease.route is model.routes[0] else None
            last_error = await _attempt(exchange, request, model, lease, affinity, relay, plan)
        finally:
            if not router.release_nowait(lease):
                await asyncio.shield(router.release(lease))
        if last_error is None:
            return
        tried.add(lease.route.backend.id)
        if pinned_id:
            break
    assert last_error is not None
    if last_error.status >= 500 and last_error.code not in ("backend_unreachable", None):
        raise ApiError(502, last_error.message, code="bad_gateway")
    raise last_error


def plan_for(request: CreateResponse, model: ModelEntry, route: Route) -> ChatPlan:
    return prepare_chat(request, limits=model.limits).for_route(
        upstream_model=route.upstream_name,
        dialect=route.backend.dialect,
        extra_body=route.backend.extra_body,
    )


async def _attempt(
    exchange: Exchange,
    request: CreateResponse,
    model: ModelEntry,
    lease: Lease,
    affinity: str | None,
    relay: Relay,
    plan: ChatPlan | None,
) -> ApiError | None:
    """One try on the leased backend: None when it answered (the exchange is
    done), or the error to fail over from when it failed before answering."""
    route = lease.route
    backend = route.backend
    exchange.attempts += 1
    exchange.backend_id, exchange.backend_name = backend.id, backend.name
    exchange.backend_version = backend.version
    plan = plan or plan_for(request, model, route)
    for notice in plan.notices:
        if notice not in exchange.notices:
            exchange.notices.append(notice)
    http = get_client(backend.base_url, backend.api_key)
    try:
        upstream = await http.send_chat(plan.body)
    except _RETRYABLE as exc:
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            await router.mark_suspect(backend.id)
        return ApiError(
            503,
            f"Backend '{backend.name}' could not be reached: {type(exc).__name__}.",
            code="backend_unreachable",
            headers=[(b"retry-after", b"5")],
        )
    except httpx.TimeoutException:
        message = f"Backend '{backend.name}' timed out."
        raise ApiError(504, message, code="backend_timeout") from None
    try:
        if upstream.status_code >= 500 or upstream.status_code == 429:
            await upstream.aread()
            return upstream_error(upstream, backend.name)
        if upstream.status_code >= 400:
            await upstream.aread()
            raise upstream_error(upstream, backend.name)
        if not lease.affine:
            # Remembered for AFFINITY_SECONDS from the first answer; a
            # conversation longer than that is placed afresh once.
            await router.remember(affinity, backend.id)
        await relay(plan, upstream)
        return None
    finally:
        # Shielded: closing is what tells the backend that the client left,
        # and what returns the connection; a second cancel must not skip it.
        await asyncio.shield(upstream.aclose())


def upstream_error(upstream: httpx.Response, backend_name: str) -> ApiError:
    status = upstream.status_code
    message = ""
    code = None
    try:
        data = orjson.loads(upstream.content)
        err = data.get("error", data) if isinstance(data, dict) else {}
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("detail") or "")
            code = err.get("code") if isinstance(err.get("code"), str) else None
            kind = err.get("type")
        elif isinstance(err, str):
            message, kind = err, None
        else:
            kind = None
    except (orjson.JSONDecodeError, AttributeError):
        kind = None
        message = upstream.text[:500]
    lowered = f"{message} {kind or ''} {code or ''}".lower()
    if status == 400 or status == 413:
        if any(w in lowered for w in ("context", "too long", "exceed", "maximum length")):
            return ApiError(
                400,
                f"The input is too long for this model: {message}",
                code="context_length_exceeded",
                param="input",
            )
        return ApiError(
            400, f"The backend refused the request: {message}", code=code or "invalid_prompt"
        )
    if status == 429:
        retry = upstream.headers.get("retry-after", "5")
        return ApiError(
            429,
            f"Backend '{backend_name}' is rate limited: {message}",
            code="rate_limit_exceeded",
            headers=[(b"retry-after", retry.encode())],
        )
    if status in (401, 403):
        return ApiError(
            502,
            f"Backend '{backend_name}' refused our credentials ({status}).",
            code="backend_auth_failed",
        )
    if status == 404:
        return ApiError(
            502,
            f"Backend '{backend_name}' does not know the model: {message}",
            code="backend_model_not_found",
        )
    return ApiError(
        502, f"Backend '{backend_name}' answered {status}: {message}", code="bad_gateway"
    )
