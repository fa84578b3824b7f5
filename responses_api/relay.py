"""One ``POST /v1/responses`` exchange: authenticate, validate, route, relay.

The consumer (``consumers.py``) owns the connection; this module owns the
request's life and its usage row. Every authenticated request leaves exactly
one row, whatever happens: the row is built in :class:`Exchange` and submitted
once, in ``finally`` (499 when the task is cancelled by a disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from django.conf import settings
from pydantic import ValidationError

from responses_api.auth import Caller, authenticate, key_from_headers
from responses_api.backends.client import chat_request, get_client
from responses_api.backends.routing import Lease, router
from responses_api.catalog import ModelEntry, get_catalog
from responses_api.errors import ApiError, from_validation_error, invalid
from responses_api.protocol import CreateResponse
from responses_api.sse import ChunkReader, EventWriter, UpstreamProtocolError
from responses_api.translate.request import ChatPlan, build_chat_request
from responses_api.translate.response import echo_settings
from responses_api.translate.stream import StreamTranslator, new_id
from responses_api.usage import sink

log = logging.getLogger("switchyard.requests")

Send = Callable[[dict[str, Any]], Awaitable[None]]
MAX_ATTEMPTS = 3
JSON = b"application/json"


class ClientGone(Exception):
    """The client disconnected; the exchange ends as a 499."""


@dataclass(slots=True)
class Exchange:
    """What is known about one request so far; becomes its usage row."""

    request_id: str
    endpoint: str
    started: float = field(default_factory=time.perf_counter)
    created_at: float = field(default_factory=time.time)
    caller: Caller | None = None
    model: str = ""
    stream: bool = False
    status: int = 0
    error_code: str = ""
    error_message: str = ""
    note: str = ""
    notices: list[dict[str, str]] = field(default_factory=list)
    backend_id: str | None = None
    backend_name: str = ""
    backend_version: str = ""
    attempts: int = 0
    queue_wait_ms: float | None = None
    ttft_ms: float | None = None
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    model_entry: ModelEntry | None = None
    client_ip: str | None = None
    user_agent: str = ""
    submitted: bool = False

    def fail(self, error: ApiError) -> None:
        self.status = error.status
        self.error_code = error.code or error.type
        self.error_message = error.message

    def take_usage(self, translator: StreamTranslator) -> None:
        usage = translator.final_usage()
        self.input_tokens = usage.input_tokens
        self.cached_tokens = usage.cached_tokens
        self.output_tokens = usage.output_tokens
        self.reasoning_tokens = usage.reasoning_tokens
        if translator.first_token_at is not None and self.ttft_ms is None:
            self.ttft_ms = (translator.first_token_at - self.started) * 1000

    def duration_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def extras(self) -> dict[str, Any]:
        duration = self.duration_ms()
        return {
            "request_id": self.request_id,
            "backend": {
                "id": self.backend_id,
                "name": self.backend_name,
                "version": self.backend_version,
            }
            if self.backend_id
            else None,
            "timing": {
                "queue_wait_ms": _round(self.queue_wait_ms),
                "ttft_ms": _round(self.ttft_ms),
                "duration_ms": _round(duration),
                "tokens_per_second": _round(self.tokens_per_second(duration)),
            },
            "notices": self.notices,
        }

    def tokens_per_second(self, duration_ms: float) -> float | None:
        if not self.output_tokens:
            return None
        generation = duration_ms - (self.ttft_ms or 0.0)
        return self.output_tokens / (generation / 1000) if generation > 0 else None

    def row(self) -> dict[str, Any]:
        caller = self.caller
        assert caller is not None
        duration = self.duration_ms()
        entry = self.model_entry
        cost = (
            entry.cost(self.input_tokens, self.cached_tokens, self.output_tokens)
            if entry is not None
            else 0
        )
        return {
            "request_id": self.request_id,
            "organisation_id": caller.organisation_id,
            "api_key_id": caller.key_id,
            "key_prefix": caller.prefix,
            "model": self.model[:200],
            "backend_id": self.backend_id,
            "backend_name": self.backend_name,
            "endpoint": self.endpoint,
            "method": "POST",
            "stream": self.stream,
            "status": self.status,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "note": self.note,
            "notices": [n["code"] for n in self.notices],
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost": cost,
            "attempts": self.attempts,
            "queue_wait_ms": self.queue_wait_ms,
            "ttft_ms": self.ttft_ms,
            "duration_ms": duration,
            "tokens_per_second": self.tokens_per_second(duration),
            "client_ip": self.client_ip,
            "user_agent": self.user_agent,
            "created_at": self.created_at,
            "finished_at": time.time(),
        }

    async def submit(self) -> None:
        if self.submitted or self.caller is None:
            return
        self.submitted = True
        row = self.row()
        await sink.submit(row)
        log.info(
            "request",
            extra={"switchyard": {k: row[k] for k in _LOG_FIELDS}},
        )


_LOG_FIELDS = (
    "request_id",
    "organisation_id",
    "key_prefix",
    "model",
    "backend_name",
    "stream",
    "status",
    "error_code",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "queue_wait_ms",
    "ttft_ms",
    "duration_ms",
)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


class Responder:
    """Writes the HTTP response; knows whether the headers went out."""

    def __init__(self, send: Send, exchange: Exchange) -> None:
        self._send = send
        self.exchange = exchange
        self.started = False
        self.finished = False

    def base_headers(self) -> list[tuple[bytes, bytes]]:
        headers = [(b"x-request-id", self.exchange.request_id.encode())]
        if self.exchange.backend_id:
            headers.append((b"x-backend-id", self.exchange.backend_id.encode()))
            headers.append((b"x-backend-name", self.exchange.backend_name.encode()))
        return headers

    async def json(self, status: int, body: bytes, extra: list[tuple[bytes, bytes]] = ()) -> None:
        headers = [(b"content-type", JSON), *self.base_headers(), *extra]
        self.started = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        self.finished = True
        await self._send({"type": "http.response.body", "body": body})

    async def error(self, error: ApiError) -> None:
        await self.json(error.status, error.to_bytes(), error.headers)

    async def start_stream(self) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            *self.base_headers(),
        ]
        self.started = True
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    async def chunk(self, data: bytes) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def end_stream(self, data: bytes) -> None:
        self.finished = True
        await self._send({"type": "http.response.body", "body": data, "more_body": False})


def scope_headers(scope: dict[str, Any]) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", ())}


def parse_request(body: bytes, headers: dict[bytes, bytes]) -> CreateResponse:
    content_type = headers.get(b"content-type", b"application/json").split(b";")[0].strip()
    if (
        content_type
        and content_type.lower() not in (JSON, b"text/json")
        and not content_type.endswith(b"+json")
    ):
        raise ApiError(
            415,
            "Content-Type must be application/json.",
            code="unsupported_media_type",
        )
    if not body:
        raise invalid("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid(
            f"The request body is not valid JSON: {exc}. Check that it is a single JSON object.",
            code="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    try:
        return CreateResponse.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    except RecursionError:
        raise invalid("The request body is nested too deeply.", code="invalid_json") from None


async def serve(
    scope: dict[str, Any], body: bytes, responder: Responder, exchange: Exchange
) -> None:
    """Run one exchange to its end. Cancellation (client gone) ends in a 499 row."""
    headers = scope_headers(scope)
    client = scope.get("client")
    exchange.client_ip = client[0] if client else None
    exchange.user_agent = headers.get(b"user-agent", b"").decode("latin-1")[:300]
    try:
        exchange.caller = await authenticate(key_from_headers(headers))
    except ApiError as error:
        await responder.error(error)  # unauthenticated: no usage row
        return
    lease: Lease | None = None
    try:
        lease = await _handle(exchange, responder, headers, body)
    except asyncio.CancelledError:
        exchange.status = 499
        exchange.note = "Client disconnected"
        exchange.error_code = "client_disconnected"
        raise
    except ApiError as error:
        exchange.fail(error)
        await exchange.submit()
        if not responder.started:
            await responder.error(error)
    except Exception as exc:  # a bug or an unexpected upstream failure: never a traceback out
        log.exception("request %s failed", exchange.request_id)
        error = ApiError(
            500, "The server had an error while processing the request.", code="server_error"
        )
        exchange.fail(error)
        exchange.error_message = f"{type(exc).__name__}: {exc}"[:2000]
        await exchange.submit()
        if not responder.started:
            await responder.error(error)
    finally:
        if lease is not None:
            router.release(lease)
        if not exchange.submitted:
            # Shielded: the row must be written even while being cancelled.
            await asyncio.shield(exchange.submit())


async def _handle(
    exchange: Exchange, responder: Responder, headers: dict[bytes, bytes], body: bytes
) -> Lease | None:
    caller = exchange.caller
    assert caller is not None
    if len(body) > settings.SWITCHYARD_MAX_BODY_BYTES:
        raise ApiError(413, "The request body is too large.", code="request_too_large")
    request = parse_request(body, headers)
    exchange.model = request.model
    exchange.stream = bool(request.stream)
    catalog = await get_catalog(caller.organisation_id)
    model = catalog.by_name.get(request.model)
    if model is None:
        raise ApiError(
            404,
            f"The model '{request.model}' does not exist or you do not have access to it. "
            "Pick one of the models listed by GET /v1/models.",
            code="model_not_found",
            param="model",
        )
    if (
        caller.allowed_models
        and model.public_id not in caller.allowed_models
        and (request.model not in caller.allowed_models)
    ):
        raise ApiError(
            403,
            f"This API key may not use the model '{request.model}'.",
            code="model_not_allowed",
            param="model",
        )
    exchange.model_entry = model
    store = _store_decision(request, caller, exchange)

    pinned = headers.get(b"x-backend-id")
    pinned_id = pinned.decode("latin-1") if pinned else None
    affinity = request.prompt_cache_key
    tried: set[str] = set()
    last_error: ApiError | None = None
    while exchange.attempts < MAX_ATTEMPTS:
        lease = await router.acquire(model, pinned=pinned_id, affinity_key=affinity, exclude=tried)
        exchange.queue_wait_ms = (exchange.queue_wait_ms or 0.0) + lease.queue_wait_ms
        route = lease.route
        backend = route.backend
        exchange.attempts += 1
        exchange.backend_id, exchange.backend_name = backend.id, backend.name
        exchange.backend_version = backend.version
        plan = build_chat_request(
            request,
            upstream_model=route.upstream_name,
            dialect=backend.dialect,
            limits=model.limits,
            extra_body=backend.extra_body,
        )
        for notice in plan.notices:
            if notice not in exchange.notices:
                exchange.notices.append(notice)
        http = get_client(backend.base_url, backend.api_key)
        try:
            upstream = await http.send(chat_request(http, plan.body), stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
            router.mark_suspect(backend.id)
            router.release(lease)
            tried.add(backend.id)
            last_error = ApiError(
                503,
                f"Backend '{backend.name}' could not be reached: {type(exc).__name__}.",
                code="backend_unreachable",
                headers=[(b"retry-after", b"5")],
            )
            if pinned_id:
                raise last_error from None
            continue
        except httpx.TimeoutException:
            router.release(lease)
            raise ApiError(
                504, f"Backend '{backend.name}' timed out.", code="backend_timeout"
            ) from None
        try:
            if upstream.status_code >= 500 or upstream.status_code == 429:
                await upstream.aread()
                router.release(lease)
                tried.add(backend.id)
                last_error = _upstream_error(upstream, backend.name)
                if pinned_id:
                    raise last_error
                continue
            if upstream.status_code >= 400:
                await upstream.aread()
                raise _upstream_error(upstream, backend.name)
            router.remember(affinity, backend.id)
            await _relay(exchange, responder, request, plan, upstream, store)
            return lease
        finally:
            await upstream.aclose()
    assert last_error is not None
    if last_error.status == 429:
        raise last_error
    if last_error.status >= 500 and last_error.code != "backend_unreachable":
        raise ApiError(502, last_error.message, code="bad_gateway")
    raise last_error


def _store_decision(request: CreateResponse, caller: Caller, exchange: Exchange) -> bool:
    if caller.retention_policy != "store":
        if request.previous_response_id is not None:
            raise invalid(
                "previous_response_id cannot be used: this organisation stores nothing "
                "(zero data retention). Send the whole conversation as input items.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        if request.store is True:
            exchange.notices.append(
                {
                    "code": "store_ignored",
                    "message": "store was ignored: this organisation stores nothing.",
                }
            )
        return False
    return request.store is not False


def _upstream_error(upstream: httpx.Response, backend_name: str) -> ApiError:
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


async def _relay(
    exchange: Exchange,
    responder: Responder,
    request: CreateResponse,
    plan: ChatPlan,
    upstream: httpx.Response,
    store: bool,
) -> None:
    echo = echo_settings(
        request,
        store=store,
        temperature=plan.body.get("temperature"),
        top_p=plan.body.get("top_p"),
        max_output_tokens=plan.max_output_tokens,
    )
    translator = StreamTranslator(
        response_id=new_id("resp"),
        model=request.model,
        echo=echo,
        tools=plan.tools,
        max_tool_calls=plan.max_tool_calls,
    )
    reader = ChunkReader()
    if exchange.stream:
        await _relay_stream(exchange, responder, translator, reader, upstream, plan)
    else:
        await _relay_json(exchange, responder, translator, reader, upstream, plan)


def _budget_notice(exchange: Exchange, translator: StreamTranslator, plan: ChatPlan) -> None:
    budget = plan.thinking_budget
    if budget is not None and translator.final_usage().reasoning_tokens >= budget > 0:
        exchange.notices.append(
            {
                "code": "thinking_budget_reached",
                "message": f"Thinking stopped at the budget of {budget} tokens.",
            }
        )


async def _first_bytes(iterator, on_wait: Callable[[], Awaitable[None]] | None) -> bytes | None:
    """Wait for the backend's first bytes, calling ``on_wait`` every keep-alive
    interval (clients such as Codex reset idle timers only on events).

    The read is awaited directly; a timer starts ``on_wait`` only when an
    interval passes, so a prompt backend costs no task and no ``asyncio.wait``.
    """
    if on_wait is None:
        return await anext(iterator, None)
    loop = asyncio.get_running_loop()
    interval = settings.SWITCHYARD_KEEPALIVE_SECONDS
    waits: list[asyncio.Task[None]] = []

    def tick() -> None:
        nonlocal timer
        waits.append(loop.create_task(on_wait()))
        timer = loop.call_later(interval, tick)

    timer = loop.call_later(interval, tick)
    try:
        return await anext(iterator, None)
    finally:
        timer.cancel()
        # A keep-alive not yet started is dropped; one started has written
        # (daphne's send does not suspend), so events never interleave.
        for task in waits:
            task.cancel()


async def _finish_upstream(iterator) -> None:
    """Read the backend's response to its end after ``[DONE]`` (the rest is
    normally already buffered) so its connection goes back to the pool:
    closing an unfinished response closes the connection, and the next
    request pays for a new one. Runs after the client has its answer."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(1.0):
            async for _ in iterator:
                pass


async def _send_now(responder: Responder, writer: EventWriter, events: list) -> None:
    """Send the first text delta at once. One read from a fast backend can
    hold the whole answer; translating all of it before the first write
    would hold the first token back. Two loop turns let the server's
    writer run (daphne writes from the loop, not in ``send``)."""
    writer.delta_sent = True
    await responder.chunk(writer.encode(events))
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def _relay_stream(
    exchange: Exchange,
    responder: Responder,
    translator: StreamTranslator,
    reader: ChunkReader,
    upstream: httpx.Response,
    plan: ChatPlan,
) -> None:
    writer = EventWriter()
    await responder.start_stream()
    await responder.chunk(writer.encode(translator.start()))

    async def keepalive() -> None:
        await responder.chunk(writer.encode([translator.keepalive()]))

    iterator = upstream.aiter_raw()
    try:
        data = await _first_bytes(iterator, keepalive)
        while data is not None:
            events = []
            for chunk in reader.feed(data):
                if "error" in chunk and not chunk.get("choices"):
                    raise _StreamError(chunk["error"])
                events.extend(translator.feed(chunk))
                if translator.first_token_at is not None and not writer.delta_sent:
                    await _send_now(responder, writer, events)
                    events = []
            if events:
                await responder.chunk(writer.encode(events))
            if reader.done:
                break
            data = await anext(iterator, None)
    except (_StreamError, UpstreamProtocolError, httpx.HTTPError) as exc:
        code, message = _failure(exc)
        exchange.take_usage(translator)
        error = ApiError(502, message, code=code)
        exchange.fail(error)  # the client saw 200 then response.failed; the row says 502
        exchange.error_code = code
        events = translator.fail(code, message, exchange.extras())
        await exchange.submit()
        await responder.end_stream(writer.encode(events))
        return
    exchange.take_usage(translator)
    _budget_notice(exchange, translator, plan)
    exchange.status = 200
    events = translator.finish(exchange.extras())
    await exchange.submit()
    await responder.end_stream(writer.encode(events))
    await _finish_upstream(iterator)


class _StreamError(Exception):
    def __init__(self, error: Any) -> None:
        self.error = error if isinstance(error, dict) else {"message": str(error)}
        super().__init__(self.error.get("message", "backend error"))


def _failure(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, _StreamError):
        message = str(exc.error.get("message") or "the backend reported an error")
        lowered = message.lower()
        if "rate" in lowered and "limit" in lowered:
            return "rate_limit_exceeded", message
        if any(w in lowered for w in ("context", "too long", "invalid", "prompt")):
            return "invalid_prompt", message
        return "server_error", message
    if isinstance(exc, UpstreamProtocolError):
        return "server_error", str(exc)
    return "server_error", f"The backend connection failed mid-stream ({type(exc).__name__})."


async def _relay_json(
    exchange: Exchange,
    responder: Responder,
    translator: StreamTranslator,
    reader: ChunkReader,
    upstream: httpx.Response,
    plan: ChatPlan,
) -> None:
    iterator = upstream.aiter_raw()
    try:
        data = await _first_bytes(iterator, None)
        while data is not None:
            for chunk in reader.feed(data):
                if "error" in chunk and not chunk.get("choices"):
                    raise _StreamError(chunk["error"])
                translator.feed(chunk)
            if reader.done:
                break
            data = await anext(iterator, None)
    except (_StreamError, UpstreamProtocolError, httpx.HTTPError) as exc:
        exchange.take_usage(translator)
        code, message = _failure(exc)
        raise ApiError(502, message, code=code) from None
    translator.close_items()
    exchange.take_usage(translator)
    _budget_notice(exchange, translator, plan)
    exchange.status = 200
    extras = exchange.extras()
    status, reason = translator.status
    body = translator.response(status, extras=extras, incomplete_reason=reason)
    timing = extras["timing"]
    server_timing = (
        f"queue;dur={timing['queue_wait_ms'] or 0}, ttft;dur={timing['ttft_ms'] or 0}, "
        f"total;dur={timing['duration_ms']}"
    )
    await exchange.submit()
    await responder.json(200, orjson.dumps(body), [(b"server-timing", server_timing.encode())])
    await _finish_upstream(iterator)


def new_request_id() -> str:
    return str(uuid.uuid4())
