"""The simulator backend: an OpenAI-compatible Chat Completions server.

A development and test backend (``python manage.py simulator --port N``),
never used unless configured. Deterministic: the same request gives the same
answer. What it does is steered by directives in the last user message:

``[[tokens:N]]``          answer with N words (default 16, capped by max_tokens)
``[[text:...]]``          answer with exactly this text
``[[reason:...]]``        think this text first (also on when thinking is enabled)
``[[reason-field:NAME]]``  send reasoning as ``NAME`` (``reasoning_content`` by default,
                          ``reasoning`` as vLLM ≥ 0.10 and Ollama do)
``[[call:NAME {json}]]``  call a tool (several directives → parallel calls)
``[[interleave]]``        stream parallel calls' arguments interleaved, piece by piece
``[[exec:COMMAND]]``      call Codex's shell tool (``exec_command``) with this command
``[[edit:PATH OLD=>NEW]]`` call ``apply_patch`` with a patch replacing line OLD by NEW
``[[write:PATH TEXT]]``   call ``apply_patch`` with a patch adding file PATH holding TEXT
``[[finish:REASON]]``     end with this finish_reason (``length``, ``content_filter``)
``[[delay:MS]]``          wait before the first token
``[[rate:N]]``            stream N tokens per second
``[[status:CODE]]``       answer with this HTTP error status before streaming
``[[fail-after:N KIND]]`` break the stream with an error after N tokens; KIND is
                          ``server`` (default), ``rate_limit`` or ``invalid_prompt``
``[[drop-after:N]]``      cut the connection after N tokens
``[[freeform-as-json]]``   a broken server: a custom (freeform) tool's input comes back
                          JSON-wrapped (``{"input": "{\"input\": ...}"}``); also
                          ``--break freeform`` for every request

With ``--context-window N`` a prompt over N tokens is refused with a 400, as
vLLM refuses it.

With a ``json_schema`` response format and no ``[[text:...]]``, the answer is
a JSON document generated from the schema; with ``json_object``, a small
object. After a tool result it answers "Tool result: <output>", or the text
of ``[[answer:...]]`` in the last user message (an answer citing sources).
It models a prefix cache (``cached_tokens`` = the longest prefix of this
prompt it processed recently) and an optional concurrency limit, and keeps
counters at ``GET /_sim/stats`` so tests can see what it produced and
when clients went away, and the last chat requests it received, newest
first, at ``GET /_sim/requests`` (what the gateway sent a backend: messages,
tools, ``tool_choice``), and the ``traceparent``/``tracestate`` each came
with at ``GET /_sim/trace-context``. No Django imports: it runs in its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import orjson

from responses_api.simulator import embeddings
from responses_api.simulator.content import (
    FAILURES,
    Stop,
    call_deltas,
    pieces_of,
    usage_of,
    words_of,
)
from responses_api.simulator.plan import CONTEXT_WINDOW, PrefixCache, plan_of, tokenized

RECENT_REQUESTS = 64
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions", "/tokenize")


class Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.completed = 0
        self.disconnects = 0
        self.tokens_produced = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.rejected = 0
        self.last_disconnect_at: float | None = None
        self.models_requests = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Simulator:
    def __init__(
        self,
        *,
        models: list[str] | None = None,
        max_concurrency: int = 0,
        version: str = "switchyard-simulator/1",
        breaks: Sequence[str] = (),
        context_window: int = CONTEXT_WINDOW,
    ) -> None:
        self.models = models or ["sim-model"]
        self.breaks = frozenset(breaks)
        self.context_window = context_window
        self.max_concurrency = max_concurrency
        self.version = version
        self.stats = Stats()
        self.prefix_cache = PrefixCache()
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_REQUESTS)
        # The W3C trace context each of them came with (empty: none).
        self.recent_context: deque[dict[str, str]] = deque(maxlen=RECENT_REQUESTS)

    # --- ASGI -----------------------------------------------------------------

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"].rstrip("/")
        if path in ("/v1/models", "/models"):
            self.stats.models_requests += 1
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "simulator"}
                for m in self.models
            ]
            await _json(
                send,
                200,
                {"object": "list", "data": data},
                [(b"x-simulator-version", self.version.encode())],
            )
            return
        if path == "/_sim/stats":
            await _json(send, 200, self.stats.as_dict())
            return
        if path == "/_sim/requests":
            await _json(send, 200, {"data": list(reversed(self.recent))})
            return
        if path == "/_sim/trace-context":
            await _json(send, 200, {"data": list(reversed(self.recent_context))})
            return
        if path == "/health":
            await _json(send, 200, {"status": "ok"})
            return
        if path not in CHAT_PATHS and path not in embeddings.PATHS:
            await _json(send, 404, {"error": {"message": "not found", "type": "not_found"}})
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if path == "/tokenize":  # vLLM's: the count this server's usage reports
            await _json(send, *tokenized(body))
            return
        if path in embeddings.PATHS:  # deterministic vectors (simulator/embeddings.py)
            await embeddings.serve(body, send)
            return
        try:
            request = orjson.loads(body)
            messages = request["messages"]
            assert isinstance(messages, list) and messages
        except Exception:
            error = {
                "message": "messages must be a non-empty list",
                "type": "invalid_request_error",
            }
            await _json(send, 400, {"error": error})
            return
        if self.max_concurrency and self.stats.in_flight >= self.max_concurrency:
            self.stats.rejected += 1
            error = {"message": "simulator is at its concurrency limit", "type": "rate_limit"}
            await _json(send, 429, {"error": error}, [(b"retry-after", b"1")])
            return
        self.recent.append(request)
        self.recent_context.append(
            {
                name.decode(): value.decode("latin-1")
                for name, value in scope.get("headers", ())
                if name.lower() in (b"traceparent", b"tracestate")
            }
        )
        self.stats.requests += 1
        self.stats.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            await self._complete(request, send, receive)
        finally:
            self.stats.in_flight -= 1

    async def _complete(self, request: dict[str, Any], send, receive) -> None:
        plan = plan_of(request, breaks=self.breaks)
        if plan["status"]:
            await _json(
                send,
                plan["status"],
                {"error": {"message": f"simulated {plan['status']}", "type": "simulated"}},
            )
            return
        prompt_tokens, cached = self.prefix_cache.usage(request)
        if self.context_window and prompt_tokens > self.context_window:
            message = (
                f"This model's maximum context length is {self.context_window} tokens. "
                f"However, your request has {prompt_tokens} input tokens."
            )
            await _json(send, 400, {"error": {"message": message, "type": "BadRequestError"}})
            return
        model = request.get("model", self.models[0])
        created = int(time.time())
        cid = "chatcmpl-" + hashlib.sha1(f"{time.time_ns()}".encode()).hexdigest()[:24]
        if not request.get("stream"):
            await asyncio.sleep(plan["delay"])
            await self._respond_json(
                request, plan, send, model, created, cid, prompt_tokens, cached
            )
            return
        disconnected = asyncio.Event()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected.set()
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            await self._stream(
                request, plan, send, model, created, cid, prompt_tokens, cached, disconnected
            )
        except (OSError, asyncio.CancelledError):
            self._note_disconnect()
            raise
        finally:
            watcher.cancel()

    def _note_disconnect(self) -> None:
        self.stats.disconnects += 1
        self.stats.last_disconnect_at = time.time()

    async def _stream(
        self,
        request,
        plan,
        send,
        model,
        created,
        cid,
        prompt_tokens,
        cached,
        disconnected: asyncio.Event,
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        head = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
        interval = 1.0 / plan["rate"] if plan["rate"] else 0.0
        produced = 0

        async def emit(delta: dict[str, Any], finish: str | None = None) -> bool:
            nonlocal produced
            if disconnected.is_set():
                return False
            chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await send(
                {
                    "type": "http.response.body",
                    "body": b"data: " + orjson.dumps(chunk) + b"\n\n",
                    "more_body": True,
                }
            )
            return True

        async def pace(first: bool) -> bool:
            if first and plan["delay"]:
                await _sleep_or_disconnect(plan["delay"], disconnected)
            elif interval:
                await _sleep_or_disconnect(interval, disconnected)
            else:
                await asyncio.sleep(0)
            return not disconnected.is_set()

        async def token(delta: dict[str, Any]) -> bool:
            nonlocal produced
            if not await pace(produced == 0):
                return False
            if produced == plan["fail_after"]:
                error = FAILURES.get(plan["fail_kind"], FAILURES["server"])
                await send(
                    {
                        "type": "http.response.body",
                        "more_body": True,
                        "body": b"data: " + orjson.dumps({"error": error}) + b"\n\n",
                    }
                )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                raise Stop
            if produced == plan["drop_after"]:
                raise ConnectionResetError("simulated drop")
            if not await emit(delta):
                return False
            produced += 1
            self.stats.tokens_produced += 1
            return True

        try:
            if not await emit({"role": "assistant", "content": ""}):
                return self._note_disconnect()
            reasoning_words = words_of(plan["reasoning"]) if plan["reasoning"] else []
            for word in reasoning_words:
                if not await token({plan["reasoning_field"]: word}):
                    return self._note_disconnect()
            for word in plan["words"]:
                if not await token({"content": word}):
                    return self._note_disconnect()
            for delta, counts in call_deltas(plan["calls"], cid, plan["interleave"]):
                sent = await token(delta) if counts else await emit(delta)
                if not sent:
                    return self._note_disconnect()
            if not await emit({}, plan["finish"]):
                return self._note_disconnect()
            if (request.get("stream_options") or {}).get("include_usage"):
                usage = usage_of(prompt_tokens, cached, produced, len(reasoning_words))
                chunk = {**head, "choices": [], "usage": usage}
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"data: " + orjson.dumps(chunk) + b"\n\n",
                        "more_body": True,
                    }
                )
            await send(
                {"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False}
            )
            self.stats.completed += 1
        except Stop:
            return

    async def _respond_json(
        self, request, plan, send, model, created, cid, prompt_tokens, cached
    ) -> None:
        reasoning_words = words_of(plan["reasoning"]) if plan["reasoning"] else []
        message: dict[str, Any] = {"role": "assistant", "content": "".join(plan["words"]) or None}
        if reasoning_words:
            message["reasoning_content"] = plan["reasoning"]
        produced = len(plan["words"]) + len(reasoning_words)
        if plan["calls"]:
            message["tool_calls"] = [
                {
                    "id": f"call_{index}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for index, (name, arguments) in enumerate(plan["calls"])
            ]
            produced += sum(len(list(pieces_of(a, 7))) for _, a in plan["calls"])
        self.stats.tokens_produced += produced
        self.stats.completed += 1
        body = {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": plan["finish"]}],
            "usage": usage_of(prompt_tokens, cached, produced, len(reasoning_words)),
        }
        await _json(send, 200, body)


async def _sleep_or_disconnect(seconds: float, disconnected: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(disconnected.wait(), timeout=seconds)


async def _json(send, status: int, data: Any, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": orjson.dumps(data)})
