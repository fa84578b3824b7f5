"""Opening a request on a backend, failing over to another (docs/operations/routing.md).

    async with failover.upstream(exchange, draft=draft, model=model) as attempt:
        ...  # relay attempt.answer

A backend that refuses the connection, drops it or answers 5xx/429 *before
anything was relayed* is not the client's problem: the request is tried on
another eligible backend, at most ``MAX_ATTEMPTS`` times in all, with the
chat body translated once (``ChatDraft.for_route``). What the block does
with the answer is the caller's; failover only closes the answer and
releases the backend's slot when the block ends, however it ends. With
Redis the slot of the backend that answered is released in the round trip
that hands the request's usage row over (``Exchange.give_back``): the
request ends with the block.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import orjson

from responses_api.backends.client import (
    Answer,
    BackendAddressRefused,
    BackendError,
    BackendTimeout,
    BackendUnreachable,
    get_client,
)
from responses_api.backends.prefix_index import PromptBlocks, prompt_blocks
from responses_api.backends.routing import Lease, router
from responses_api.catalogue.catalog import ModelEntry, Route
from responses_api.pipeline.exchange import Exchange
from responses_api.pipeline.turn_state import turn_token
from responses_api.protocol.errors import TRACE_BODY_BYTES, ApiError, trace_excerpt
from responses_api.store.seal import cache_salt
from responses_api.translate.request import ChatDraft, ChatPlan

MAX_ATTEMPTS = 3


@dataclass(slots=True)
class Attempt:
    """The backend that answered, the body it was sent, and its answer."""

    route: Route
    plan: ChatPlan
    answer: Answer


@asynccontextmanager
async def upstream(
    exchange: Exchange,
    *,
    draft: ChatDraft,
    model: ModelEntry,
    pinned: str | None = None,
    affinity: str | None = None,
    turn: str | None = None,
    path: str = "/chat/completions",
) -> AsyncIterator[Attempt]:
    """The first backend that answers, leased for the block. Until one has
    answered, a failure is retried on another eligible one; a
    pinned request is never moved. ``turn`` is the backend a Codex
    turn-state token names (``turn_state``): tried first. ``path``: the
    backend's endpoint (``/embeddings`` for an ``EmbeddingDraft``). Raises the
    ``ApiError`` to answer when none does."""
    tried: set[str] = set()
    last_error: ApiError | None = None
    # What the backends' prefix indexes know the prompt by: worth working
    # out only when there is a choice of backend.
    prompt = None
    chat = path == "/chat/completions"
    if chat and pinned is None and len(model.routes) > 1 and exchange.caller is not None:
        organisation_id = exchange.caller.organisation_id
        prompt = prompt_blocks(organisation_id, draft.body, cache_salt(organisation_id))
    while exchange.attempts < MAX_ATTEMPTS:
        lease = await _lease(exchange, model, pinned, (affinity, turn, prompt), tried, last_error)
        if lease is None:
            break
        route = lease.route
        answered = False
        try:
            plan = draft.for_route(
                upstream_model=route.upstream_name,
                dialect=route.backend.dialect,
                extra_body=route.backend.extra_body,
            )
            for notice in plan.notices:
                exchange.notice(notice["code"], notice["message"])
            exchange.attempt(route.backend, lease.reason, lease.prefix_tokens)
            answer, last_error = await _open(route, plan, path)
            if answer is not None:
                try:
                    if not lease.affine:
                        # Remembered for AFFINITY_SECONDS from the first answer; a
                        # conversation longer than that is placed afresh once.
                        await router.remember(affinity, route.backend.id)
                    placed = router.placed(lease, prompt)
                    if placed is not None:
                        await exchange.give_back(placed)
                    if prompt is not None and (
                        turn != route.backend.id or not exchange.placement.turn_state
                    ):
                        # A turn kept where its token said keeps its token;
                        # a request with no choice of backend needs none.
                        assert exchange.caller is not None
                        exchange.turn_held(
                            turn_token(exchange.caller.organisation_id, model, route.backend.id)
                        )
                    answered = True
                    yield Attempt(route, plan, answer)
                    return
                finally:
                    answer.close()
        finally:
            # The request ends with the block that had an answer: its slot
            # goes back with the usage row. One that failed over is freed now.
            release = router.release_later(lease) if answered else None
            if release is not None:
                await exchange.give_back(release)
            elif not router.release_nowait(lease):
                await asyncio.shield(router.release(lease))
        tried.add(route.backend.id)
        if pinned:
            break
    assert last_error is not None
    if last_error.status >= 500 and last_error.code not in _KEPT_CODES:
        raise ApiError(502, last_error.message, code="bad_gateway", detail=last_error.detail)
    raise last_error


# Codes that stay what they are when no backend is left to fail over to.
_KEPT_CODES = frozenset({"backend_unreachable", "backend_address_not_allowed", None})


async def _lease(
    exchange: Exchange,
    model: ModelEntry,
    pinned: str | None,
    scored: tuple[str | None, str | None, PromptBlocks | None],
    tried: set[str],
    last_error: ApiError | None,
) -> Lease | None:
    """A slot on the best backend not yet tried; None when none is left to
    fail over to (the last backend's error is then the answer). ``scored``:
    the conversation's affinity, the turn's backend and the prompt's blocks."""
    affinity, turn, prompt = scored
    waiting_since = time.monotonic()
    try:
        lease = await router.acquire(
            model, pinned=pinned, affinity=affinity, exclude=tried, prompt=prompt, turn=turn
        )
    except ApiError as error:
        exchange.waited((time.monotonic() - waiting_since) * 1000)
        if last_error is not None and error.code == "no_backend_available":
            return None
        raise
    except asyncio.CancelledError:
        # A client gone while queued: the row still tells how long it waited.
        exchange.waited((time.monotonic() - waiting_since) * 1000)
        raise
    exchange.waited(lease.queue_wait_ms)
    return lease


async def _open(route: Route, plan: ChatPlan, path: str) -> tuple[Answer | None, ApiError | None]:
    """Send the request: the answer to relay, or the error to fail over
    from (raised instead when trying elsewhere would not help)."""
    backend = route.backend
    http = get_client(backend.base_url, backend.api_key, allow_private=backend.allow_private)
    try:
        answer = await http.send_chat(plan.body, path)
    except BackendTimeout:
        raise ApiError(
            504, f"Backend '{backend.name}' timed out.", code="backend_timeout"
        ) from None
    except BackendAddressRefused as exc:
        # Another backend may be allowed; this one stays avoided for a while.
        await router.mark_suspect(backend.id)
        return None, ApiError(
            502, f"Backend '{backend.name}': {exc}", code="backend_address_not_allowed"
        )
    except BackendError as exc:
        if isinstance(exc, BackendUnreachable):
            await router.mark_suspect(backend.id)
        return None, ApiError(
            503,
            f"Backend '{backend.name}' could not be reached: {type(exc).__name__}.",
            code="backend_unreachable",
            headers=[(b"retry-after", b"5")],
        )
    if answer.status < 400:
        return answer, None
    try:
        error = upstream_error(answer.status, await answer.read(), answer.headers, backend.name)
    except BackendError:
        error = ApiError(502, f"Backend '{backend.name}' answered {answer.status}.")
    finally:
        answer.close()
    if answer.status >= 500 or answer.status == 429:
        return None, error
    raise error


@asynccontextmanager
async def first_token_deadline(
    exchange: Exchange, seconds: float
) -> AsyncIterator[asyncio.Timeout]:
    """The block, open a backend and read its answer, under the first
    token's deadline (queueing included): past it, the 504 a backend that
    says nothing earns. The reader lifts the deadline (``reschedule(None)``)
    once a token came: a stream's pace after that is the read timeout's."""
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            yield deadline
    except TimeoutError:
        if not deadline.expired():
            raise
        backend = exchange.backend
        raise ApiError(
            504,
            f"Backend '{backend.name if backend else '?'}' sent no token within {seconds:g} s.",
            code="backend_timeout",
        ) from None


def upstream_error(
    status: int, content: bytes, headers: Mapping[str, str], backend_name: str
) -> ApiError:
    """The error to answer for a backend's 4xx/5xx.

    The client gets the status and a fixed message naming the backend, never
    the body: a backend URL pointed at some other service would otherwise
    read that service's answers back through the gateway. The body is read
    only to classify the error (an input past the context window), and its
    first ``TRACE_BODY_BYTES`` go to the usage row for support."""
    message, code, kind = _error_fields(content)
    detail = trace_excerpt(content)
    lowered = f"{message} {kind} {code}".lower()
    named = f"The backend '{backend_name}'"
    if status in (400, 413):
        if any(w in lowered for w in ("context", "too long", "exceed", "maximum length")):
            return ApiError(
                400,
                f"The input is too long for this model ({named} answered {status}).",
                code="context_length_exceeded",
                param="input",
                detail=detail,
            )
        return ApiError(
            400,
            f"{named} refused the request ({status}).",
            code="invalid_prompt",
            detail=detail,
        )
    if status == 429:
        return ApiError(
            429,
            f"{named} is rate limited (429).",
            code="rate_limit_exceeded",
            headers=[(b"retry-after", _retry_after(headers))],
            detail=detail,
        )
    if status in (401, 403):
        return ApiError(
            502,
            f"{named} refused our credentials ({status}).",
            code="backend_auth_failed",
            detail=detail,
        )
    if status == 404:
        return ApiError(
            502,
            f"{named} does not know the model (404).",
            code="backend_model_not_found",
            detail=detail,
        )
    return ApiError(502, f"{named} answered {status}.", code="bad_gateway", detail=detail)


def _error_fields(content: bytes) -> tuple[str, str, str]:
    """The message, code and type of an OpenAI-style error body, for
    classifying it; empty strings when the body is not one."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        return content[:TRACE_BODY_BYTES].decode("utf-8", "replace"), "", ""
    err = data.get("error", data) if isinstance(data, dict) else {}
    if isinstance(err, str):
        return err, "", ""
    if not isinstance(err, dict):
        return "", "", ""
    message = str(err.get("message") or err.get("detail") or "")
    code = err.get("code")
    kind = err.get("type")
    return message, code if isinstance(code, str) else "", kind if isinstance(kind, str) else ""


def _retry_after(headers: Mapping[str, str]) -> bytes:
    """The backend's ``Retry-After`` in whole seconds, else 5: whatever
    else it sent is not passed on."""
    value = headers.get("retry-after", "").strip()
    return value.encode() if value.isascii() and value.isdigit() and len(value) <= 6 else b"5"
