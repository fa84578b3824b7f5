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

from responses_api.auth import Caller, authenticate, cached_caller, key_from_headers
from responses_api.backends.client import raw_chunks
from responses_api.backends.failover import forward, plan_for
from responses_api.catalog import ModelEntry, get_catalog
from responses_api.draining import shutting_down
from responses_api.errors import ApiError, from_validation_error, invalid
from responses_api.metrics import request_observe
from responses_api.protocol import CreateResponse
from responses_api.ratelimit import estimate_tokens, limits_admit, limits_settle
from responses_api.sse import ChunkReader, EventWriter, UpstreamProtocolError
from responses_api.translate.request import ChatPlan
from responses_api.translate.response import echo_settings
from responses_api.translate.stream import StreamTranslator, new_id
from responses_api.usage import sink

log = logging.getLogger("switchyard.requests")

Send = Callable[[dict[str, Any]], Awaitable[None]]
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
    # Set by draining.Drain when the process's shutdown deadline ends this
    # exchange: its cancellation then ends it as a 503, not a 499.
    shutdown: bool = False
    # x-ratelimit-* headers for every response of a rate-limited caller.
    limit_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    # The stream's translator and event numbering, once the stream exists
    # (it may start while the request still waits for a backend slot).
    translator: StreamTranslator | None = None
    writer: EventWriter | None = None

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
        appending = sink.submit(row)
        if appending is not None:
            # Shielded: a disconnect arriving now must not cut the row off half-sent.
            await asyncio.shield(appending)
        request_observe(row=row)
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
        headers.extend(self.exchange.limit_headers)
        return headers

    async def json(self, status: int, body: bytes, extra: list[tuple[bytes, bytes]] = ()) -> None:
        # A length lets the server send the answer in one write: without one,
        # daphne (Twisted) frames it as chunked and writes the terminating
        # chunk separately, a second system call per request.
        headers = [
            (b"content-type", JSON),
            (b"content-length", b"%d" % len(body)),
            *self.base_headers(),
            *extra,
        ]
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
        """Write stream bytes. The relay writes once per backend read (every
        event that read produced), not once per event."""
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
    raw_key = key_from_headers(headers)
    try:
        try:
            exchange.caller = cached_caller(raw_key) or await _authenticate(exchange, raw_key)
        except ApiError as error:
            await responder.error(error)  # unauthenticated: no usage row
            return
        await _handle(exchange, responder, headers, body)
    except asyncio.CancelledError:
        if exchange.translator is not None:
            exchange.take_usage(exchange.translator)  # the tokens produced until now
        if not exchange.shutdown:
            exchange.status = 499
            exchange.note = "Client disconnected"
            exchange.error_code = "client_disconnected"
            raise
        error = shutting_down()
        exchange.fail(error)
        exchange.note = "Server shut down"
        await exchange.submit()
        if not responder.started:
            await responder.error(error)
        elif not responder.finished:
            await _fail_stream(exchange, responder, error)
    except ApiError as error:
        exchange.fail(error)
        await exchange.submit()
        if not responder.started:
            await responder.error(error)
        elif not responder.finished:
            await _fail_stream(exchange, responder, error)
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
        elif not responder.finished:
            await _fail_stream(exchange, responder, error)
    finally:
        if not exchange.submitted:
            # Shielded: the row must be written even while being cancelled.
            await asyncio.shield(exchange.submit())


async def _authenticate(exchange: Exchange, raw_key: str | None) -> Caller:
    """A key the cache does not know, checked in the database. Shielded: a
    client gone while its key is checked still leaves a 499 row when the key
    is valid (``serve``'s ``finally``)."""
    auth = asyncio.ensure_future(authenticate(raw_key))
    try:
        return await asyncio.shield(auth)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            exchange.caller = await auth
        raise


async def _handle(
    exchange: Exchange, responder: Responder, headers: dict[bytes, bytes], body: bytes
) -> None:
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
        catalog = await get_catalog(caller.organisation_id, missing=request.model)
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

    admission = await limits_admit(caller=caller, estimate=estimate_tokens(body))
    if admission is not None:
        exchange.limit_headers = admission.headers
    # Validates the request before it queues; its envelope (echoed settings,
    # tools) is what a stream that starts while queued announces.
    preview = plan_for(request, model, model.routes[0]) if model.routes else None
    pinned = headers.get(b"x-backend-id")
    try:
        await forward(
            exchange,
            request=request,
            model=model,
            pinned=pinned.decode("latin-1").strip() if pinned else None,
            on_wait=(
                _queue_keepalive(exchange, responder, request, preview, store)
                if exchange.stream and preview is not None
                else None
            ),
            relay=lambda plan, upstream: _relay(
                exchange, responder, request, plan, upstream, store
            ),
            planned=preview,
        )
    finally:
        if admission is not None:
            # Input tokens the backend never reported (a cancelled request)
            # stay counted at the admission estimate.
            used = (exchange.input_tokens or admission.estimate) + exchange.output_tokens
            await asyncio.shield(limits_settle(admission=admission, tokens=used))


def _queue_keepalive(
    exchange: Exchange,
    responder: Responder,
    request: CreateResponse,
    plan: ChatPlan,
    store: bool,
) -> Callable[[], Awaitable[None]]:
    """While a stream waits for a backend slot: start the stream at the first
    keep-alive tick, then repeat ``response.in_progress`` (SPEC §4.6)."""

    async def tick() -> None:
        if exchange.translator is None:
            exchange.translator = _new_translator(request, plan, store)
            exchange.writer = EventWriter()
            await responder.start_stream()
            await responder.chunk(exchange.writer.encode(exchange.translator.start()))
        elif exchange.writer is not None:
            await responder.chunk(exchange.writer.encode([exchange.translator.keepalive()]))

    return tick


async def _fail_stream(exchange: Exchange, responder: Responder, error: ApiError) -> None:
    """End a stream that started (while queued) but could not go on."""
    if exchange.translator is None or exchange.writer is None:
        return
    code = "rate_limit_exceeded" if error.status == 429 else "server_error"
    events = exchange.translator.fail(code, error.message, exchange.extras())
    await responder.end_stream(exchange.writer.encode(events))


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


async def _relay(
    exchange: Exchange,
    responder: Responder,
    request: CreateResponse,
    plan: ChatPlan,
    upstream: httpx.Response,
    store: bool,
) -> None:
    translator = exchange.translator or _new_translator(
        request, plan, store, quiet=not exchange.stream
    )
    exchange.translator = translator
    reader = ChunkReader()
    if exchange.stream:
        await _relay_stream(exchange, responder, translator, reader, upstream, plan)
    else:
        await _relay_json(exchange, responder, translator, reader, upstream, plan)


def _new_translator(
    request: CreateResponse, plan: ChatPlan, store: bool, *, quiet: bool = False
) -> StreamTranslator:
    echo = echo_settings(
        request,
        store=store,
        temperature=plan.body.get("temperature"),
        top_p=plan.body.get("top_p"),
        max_output_tokens=plan.max_output_tokens,
    )
    return StreamTranslator(
        response_id=new_id("resp"),
        model=request.model,
        echo=echo,
        tools=plan.tools,
        max_tool_calls=plan.max_tool_calls,
        quiet=quiet,
    )


def _budget_notice(exchange: Exchange, translator: StreamTranslator, plan: ChatPlan) -> None:
    budget = plan.thinking_budget
    if budget is not None and translator.final_usage().reasoning_tokens >= budget > 0:
        exchange.notices.append(
            {
                "code": "thinking_budget_reached",
                "message": f"Thinking stopped at the budget of {budget} tokens.",
            }
        )


class _Idle:
    """Calls ``on_idle`` whenever ``interval`` seconds pass without a
    :meth:`touch`: a stream whose backend is silent repeats
    ``response.in_progress`` (clients such as Codex reset idle timers only on
    events, SPEC §4.6). One timer per stream, re-armed from the last touch,
    so a read costs an attribute write, not a timer."""

    __slots__ = ("_handle", "_loop", "interval", "last", "on_idle", "pending")

    def __init__(self, interval: float, on_idle: Callable[[], Awaitable[None]]) -> None:
        self._loop = asyncio.get_running_loop()
        self.interval = interval
        self.on_idle = on_idle
        self.pending: list[asyncio.Task[None]] = []
        self.last = self._loop.time()
        self._handle = self._loop.call_at(self.last + interval, self._check)

    def touch(self) -> None:
        self.last = self._loop.time()

    def _check(self) -> None:
        now = self._loop.time()
        if now - self.last >= self.interval:
            self.pending.append(self._loop.create_task(self.on_idle()))
            self.last = now
        self._handle = self._loop.call_at(self.last + self.interval, self._check)

    async def stop(self) -> None:
        """No more keep-alives; those already under way finish writing first,
        so that the stream's last events follow them."""
        self._handle.cancel()
        if self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)


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
    would hold the first token back. (``config.serve`` makes daphne send a
    write at once rather than from the loop's next turn.)"""
    writer.delta_sent = True
    await responder.chunk(writer.encode(events))


async def _relay_stream(
    exchange: Exchange,
    responder: Responder,
    translator: StreamTranslator,
    reader: ChunkReader,
    upstream: httpx.Response,
    plan: ChatPlan,
) -> None:
    writer = exchange.writer or EventWriter()
    exchange.writer = writer
    if not responder.started:
        await responder.start_stream()
        await responder.chunk(writer.encode(translator.start()))

    async def keepalive() -> None:
        await responder.chunk(writer.encode([translator.keepalive()]))

    iterator = raw_chunks(upstream)
    idle = _Idle(settings.SWITCHYARD_KEEPALIVE_SECONDS, keepalive)
    try:
        try:
            data = await anext(iterator, None)
            while data is not None:
                idle.touch()
                events = []
                for chunk in reader.feed(data):
                    if "error" in chunk and not chunk.get("choices"):
                        if events:  # the tokens read with the error still reach the client
                            await responder.chunk(writer.encode(events))
                        raise _StreamError(chunk["error"])
                    events.extend(translator.feed(chunk))
                    if translator.first_token_at is not None and not writer.delta_sent:
                        await _send_now(responder, writer, events)
                        events = []
                # One write for everything this read produced.
                if events:
                    await responder.chunk(writer.encode(events))
                if reader.done:
                    break
                data = await anext(iterator, None)
        finally:
            await idle.stop()
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
    except asyncio.CancelledError:
        if not exchange.shutdown:
            raise
        # The process's shutdown deadline: end the stream properly, keep the tokens.
        exchange.take_usage(translator)
        error = shutting_down()
        exchange.fail(error)
        exchange.note = "Server shut down"
        events = translator.fail("server_error", error.message, exchange.extras())
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
        # Servers name the kind in `type` or `code` (or only in the message).
        lowered = " ".join(str(exc.error.get(k) or "") for k in ("type", "code", "message")).lower()
        if ("rate" in lowered and "limit" in lowered) or "429" in lowered:
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
    iterator = raw_chunks(upstream)
    try:
        data = await anext(iterator, None)
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
