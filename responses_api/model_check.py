"""Is a model ready for Codex? ``manage.py model_check`` asks it, through Switchyard.

Every capability is one small request to the API's own ASGI application
(:class:`responses_api.consumers.ApiConsumer`), in-process, with real HTTP
from there to the backend: the path a client's request takes, translation
included. The prompts are the check's own, natural instructions that a real
model can follow, with the simulator's directives (``[[call:...]]``) beside
them so the simulator answers the same way.

The check authenticates as the organisation with a key of its own, created
for the run (expiring within the hour) and revoked after it; the rows of
that key are marked ``is_check`` (:data:`responses_api.exchange.check_keys`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import orjson
from asgiref.sync import sync_to_async
from django.utils import timezone

from accounts.models import Organisation
from responses_api import exchange as exchange_module
from responses_api.models import Backend, ModelCheck, ServedModel, UsageLog

REQUEST_TIMEOUT = 60.0
RAW_LIMIT = 2000

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
APPLY_PATCH_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch in the apply_patch format (*** Begin Patch ... *** End Patch).",
    "format": {"type": "text"},
}
NAMESPACE_TOOL = {
    "type": "namespace",
    "name": "weather",
    "description": "Weather services.",
    "tools": [
        {
            "type": "function",
            "name": "get_forecast",
            "description": "Get tomorrow's forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ],
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
    "required": ["city", "sunny"],
    "additionalProperties": False,
}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


class CheckError(Exception):
    """The check cannot run (unknown organisation, model or backend)."""


@dataclass
class Result:
    name: str
    passed: bool
    detail: str = ""
    raw: str = ""
    skipped: bool = False


@dataclass
class Answer:
    """What the application answered to one request."""

    status: int = 0
    body: bytes = b""
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def terminal(self) -> dict[str, Any] | None:
        return self.events[-1] if self.events else None

    @property
    def response(self) -> dict[str, Any]:
        if self.events:
            return self.events[-1].get("response") or {}
        with contextlib.suppress(orjson.JSONDecodeError):
            data = orjson.loads(self.body)
            return data if isinstance(data, dict) else {}
        return {}

    def output(self, kind: str) -> list[dict[str, Any]]:
        return [item for item in self.response.get("output") or () if item.get("type") == kind]

    def text(self) -> str:
        return "".join(
            part.get("text", "")
            for item in self.output("message")
            for part in item.get("content") or ()
            if part.get("type") == "output_text"
        )

    def error(self) -> dict[str, Any]:
        if self.events:
            response = self.response
            return response.get("error") or self.events[-1].get("error") or {}
        with contextlib.suppress(orjson.JSONDecodeError):
            data = orjson.loads(self.body)
            if isinstance(data, dict):
                return data.get("error") or {}
        return {}

    def raw(self) -> str:
        if self.events:
            return orjson.dumps(self.events[-1]).decode()[:RAW_LIMIT]
        return self.body.decode("utf-8", "replace")[:RAW_LIMIT]


def _events(data: bytes) -> list[dict[str, Any]]:
    events = []
    for block in data.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    events.append(orjson.loads(line[5:].strip()))
    return events


class Client:
    """Requests to the API's ASGI application, as the check's key."""

    def __init__(self, key: str, backend_id: str | None, timeout: float) -> None:
        self.key = key
        self.backend_id = backend_id
        self.timeout = timeout

    def scope(self) -> dict[str, Any]:
        headers = [
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {self.key}".encode()),
            (b"user-agent", b"switchyard-model-check"),
        ]
        if self.backend_id:
            headers.append((b"x-backend-id", self.backend_id.encode()))
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/responses",
            "raw_path": b"/v1/responses",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0),
        }

    async def send(
        self, body: dict[str, Any], *, disconnect_on: bytes | None = None
    ) -> tuple[Answer, bool]:
        """``body`` to the application; with ``disconnect_on``, go away as
        soon as the answer holds it. Returns the answer and whether it did."""
        from responses_api.consumers import ApiConsumer

        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await inbox.put({"type": "http.request", "body": orjson.dumps(body), "more_body": False})
        answer = Answer()
        done = asyncio.Event()
        seen = asyncio.Event()

        async def receive() -> dict[str, Any]:
            return await inbox.get()

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                answer.status = message["status"]
            elif message["type"] == "http.response.body":
                answer.body += message.get("body", b"")
                if disconnect_on is not None and disconnect_on in answer.body:
                    seen.set()
                if not message.get("more_body"):
                    done.set()

        app = asyncio.ensure_future(ApiConsumer()(self.scope(), receive, send))
        left = False
        try:
            if disconnect_on is not None:
                waiting = asyncio.ensure_future(seen.wait())
                await asyncio.wait(
                    {app, waiting}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
                )
                waiting.cancel()
                if seen.is_set():
                    left = True
                    await inbox.put({"type": "http.disconnect"})
            await asyncio.wait_for(asyncio.shield(app), timeout=self.timeout)
        except TimeoutError:
            await inbox.put({"type": "http.disconnect"})
            app.cancel()
            with contextlib.suppress(BaseException):
                await app
            answer.body += b"\n(no complete answer within the timeout)"
        if answer.body.lstrip().startswith(b"event:") or b"\ndata: " in answer.body[:200]:
            answer.events = _events(answer.body)
        return answer, left


@dataclass
class Context:
    client: Client
    model: ServedModel
    backend: Backend | None
    key_id: str

    async def ask(self, **body: Any) -> Answer:
        request = {"model": self.model.public_id, "stream": True, "temperature": 0, **body}
        answer, _ = await self.client.send(request)
        return answer


Check = Callable[[Context], Awaitable[Result]]


def _fail(name: str, detail: str, answer: Answer) -> Result:
    return Result(name, False, detail, answer.raw())


def _completed(answer: Answer) -> str | None:
    """Why ``answer`` is not a completed response, or None."""
    if answer.status != 200:
        return f"HTTP {answer.status}"
    terminal = answer.terminal
    if terminal is None:
        return "no events in the stream"
    if terminal.get("type") != "response.completed":
        return f"the stream ended in {terminal.get('type')}, not response.completed"
    return None


# --- the capabilities ------------------------------------------------------


async def check_text(ctx: Context) -> Result:
    name = "text"
    answer = await ctx.ask(
        input="Say hello in one short sentence. [[tokens:8]]", max_output_tokens=64
    )
    if why := _completed(answer):
        return _fail(name, why, answer)
    deltas = "".join(
        e.get("delta", "") for e in answer.events if e.get("type") == "response.output_text.delta"
    )
    if not answer.text() or deltas != answer.text():
        return _fail(name, "no streamed text, or deltas differ from the final text", answer)
    return Result(name, True, f"{len(answer.text())} characters")


def _weather_call(answer: Answer) -> dict[str, Any] | None:
    for call in answer.output("function_call"):
        if call.get("name") == "get_weather":
            return call
    return None


async def check_function_call(ctx: Context) -> Result:
    name = "function_call"
    question = (
        'What is the weather in Paris? Call the tool get_weather with city "Paris". '
        '[[call:get_weather {"city":"Paris"}]]'
    )
    first = await ctx.ask(
        input=question, tools=[WEATHER_TOOL], tool_choice="required", max_output_tokens=128
    )
    if why := _completed(first):
        return _fail(name, why, first)
    call = _weather_call(first)
    if call is None:
        return _fail(name, "no get_weather call", first)
    try:
        arguments = json.loads(call.get("arguments") or "")
    except ValueError:
        return _fail(name, "the call's arguments are not JSON", first)
    if not isinstance(arguments, dict) or "city" not in arguments:
        return _fail(name, "the call's arguments have no city", first)
    second = await ctx.ask(
        input=[
            {"role": "user", "content": question},
            {k: call[k] for k in ("type", "call_id", "name", "arguments")},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny, 21 C"},
        ],
        tools=[WEATHER_TOOL],
        max_output_tokens=128,
    )
    if why := _completed(second):
        return _fail(name, f"round trip: {why}", second)
    if not second.text():
        return _fail(name, "round trip: no text after the tool's output", second)
    return Result(name, True, f"called with {arguments}; answered after the output")


async def check_parallel_calls(ctx: Context) -> Result:
    name = "parallel_calls"
    answer = await ctx.ask(
        input=(
            "What is the weather in Paris and in London? Call get_weather twice at once, "
            'once per city. [[call:get_weather {"city":"Paris"}]] '
            '[[call:get_weather {"city":"London"}]] [[interleave]]'
        ),
        tools=[WEATHER_TOOL],
        tool_choice="required",
        parallel_tool_calls=True,
        max_output_tokens=256,
    )
    if why := _completed(answer):
        return _fail(name, why, answer)
    calls = [c for c in answer.output("function_call") if c.get("name") == "get_weather"]
    if len(calls) < 2:
        return _fail(name, f"{len(calls)} get_weather call(s), not 2", answer)
    if len({c.get("call_id") for c in calls}) != len(calls):
        return _fail(name, "the calls share a call_id", answer)
    return Result(name, True, f"{len(calls)} calls")


async def check_custom_tool(ctx: Context) -> Result:
    name = "custom_tool"
    answer = await ctx.ask(
        input=(
            "Create the file hello.txt holding the single line hello, with the apply_patch "
            "tool. Its input is the raw patch:\n" + PATCH + "[[write:hello.txt hello]]"
        ),
        tools=[APPLY_PATCH_TOOL],
        tool_choice="required",
        max_output_tokens=256,
    )
    if why := _completed(answer):
        return _fail(name, why, answer)
    calls = [c for c in answer.output("custom_tool_call") if c.get("name") == "apply_patch"]
    if not calls:
        return _fail(name, "no apply_patch custom tool call", answer)
    text = calls[0].get("input", "")
    deltas = "".join(
        e.get("delta", "")
        for e in answer.events
        if e.get("type") == "response.custom_tool_call_input.delta"
    )
    if deltas != text:
        return _fail(name, "the streamed input differs from the final input", answer)
    with contextlib.suppress(ValueError):
        if isinstance(json.loads(text), dict | list | str):
            return _fail(name, "the input is JSON-wrapped, not the raw patch", answer)
    stripped = text.strip()
    if not (stripped.startswith("*** Begin Patch") and stripped.endswith("*** End Patch")):
        return _fail(name, "the input is not an apply_patch patch", answer)
    if "hello.txt" not in text:
        return _fail(name, "the patch does not add hello.txt", answer)
    return Result(name, True, f"{len(text)} characters of patch")


async def check_namespace_tool(ctx: Context) -> Result:
    name = "namespace_tool"
    answer = await ctx.ask(
        input=(
            'What is tomorrow\'s forecast for Paris? Call weather.get_forecast with city "Paris". '
            '[[call:weather__get_forecast {"city":"Paris"}]]'
        ),
        tools=[NAMESPACE_TOOL],
        tool_choice="required",
        max_output_tokens=128,
    )
    if why := _completed(answer):
        return _fail(name, why, answer)
    calls = answer.output("function_call")
    if not any(c.get("name") == "get_forecast" and c.get("namespace") == "weather" for c in calls):
        return _fail(name, "no get_forecast call in the weather namespace", answer)
    return Result(name, True, "weather.get_forecast called")


async def check_reasoning_on(ctx: Context) -> Result:
    name = "reasoning_on"
    levels = ctx.model.effort_levels()
    if not levels:
        return Result(name, True, "the model does not reason", skipped=True)
    answer = await ctx.ask(
        input="Think first, then say hi. [[reason:The user wants a greeting.]] [[tokens:4]]",
        reasoning={"effort": ctx.model.effort_default() or levels[0]},
        max_output_tokens=512,
    )
    if answer.status != 200 or answer.terminal is None:
        return _fail(name, f"HTTP {answer.status}", answer)
    reasoning = answer.output("reasoning")
    details = (answer.response.get("usage") or {}).get("output_tokens_details") or {}
    if not reasoning and not details.get("reasoning_tokens"):
        return _fail(name, "no reasoning item and no reasoning tokens", answer)
    return Result(name, True, f"{details.get('reasoning_tokens', 0)} reasoning tokens")


async def check_reasoning_off(ctx: Context) -> Result:
    name = "reasoning_off"
    answer = await ctx.ask(input="Say hi. [[tokens:4]]", max_output_tokens=64)
    if why := _completed(answer):
        return _fail(name, why, answer)
    if answer.output("reasoning"):
        return _fail(name, "a reasoning item although reasoning was not asked for", answer)
    if not answer.text():
        return _fail(name, "no text", answer)
    return Result(name, True, "text without reasoning")


async def check_json_schema(ctx: Context) -> Result:
    name = "json_schema"
    answer = await ctx.ask(
        input='Is it sunny in Paris? Answer as JSON with "city" and "sunny".',
        text={
            "format": {
                "type": "json_schema",
                "name": "weather_answer",
                "schema": ANSWER_SCHEMA,
                "strict": True,
            }
        },
        max_output_tokens=128,
    )
    if why := _completed(answer):
        return _fail(name, why, answer)
    try:
        document = json.loads(answer.text())
    except ValueError as error:
        return _fail(name, f"not JSON: {str(error)[:200]}", answer)
    if not (
        isinstance(document, dict)
        and set(document) == {"city", "sunny"}
        and isinstance(document["city"], str)
        and isinstance(document["sunny"], bool)
    ):
        return _fail(name, "the JSON does not match the schema", answer)
    return Result(name, True, answer.text()[:100])


async def check_context_window(ctx: Context) -> Result:
    name = "context_window"
    window = ctx.model.context_window
    if not window:
        return Result(name, True, "the model has no context window set", skipped=True)
    # About one token per word for BPE vocabularies (and for the simulator).
    near = await ctx.ask(
        input="Say ok. [[tokens:2]] " + "the " * (window // 2), max_output_tokens=8
    )
    if near.status != 200 or near.terminal is None or near.error():
        return _fail(name, f"{window // 2} words were refused: HTTP {near.status}", near)
    past = await ctx.ask(input="Say ok. " + "the " * (window * 2), max_output_tokens=8)
    code = past.error().get("code")
    if past.status != 400 or code != "context_length_exceeded":
        return _fail(
            name, f"past the window: HTTP {past.status} {code}, not context_length_exceeded", past
        )
    return Result(name, True, f"near {window} accepted, past it context_length_exceeded")


async def check_cancellation(ctx: Context) -> Result:
    name = "cancellation"
    stats_url = _sim_stats_url(ctx.backend)
    before = await _sim_stats(stats_url)
    started = timezone.now()
    answer, left = await ctx.client.send(
        {
            "model": ctx.model.public_id,
            "stream": True,
            "temperature": 0,
            "input": "Write a long story about a lighthouse. [[tokens:400]] [[rate:40]]",
            "max_output_tokens": 400,
        },
        disconnect_on=b'"response.output_text.delta"',
    )
    if not left:
        return _fail(name, "the stream ended before any text: nothing to cancel", answer)
    if before is not None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            after = await _sim_stats(stats_url)
            if after is not None and after["disconnects"] > before["disconnects"]:
                return Result(name, True, "the backend saw the disconnect")
            await asyncio.sleep(0.1)
        return _fail(name, "the backend's disconnect counter did not move", answer)
    status = await _check_row_status(ctx.key_id, started)
    if status != 499:
        return _fail(name, f"the request's usage row is {status}, not 499", answer)
    return Result(name, True, "the request ended as 499, the upstream request aborted")


def _sim_stats_url(backend: Backend | None) -> str | None:
    if backend is None:
        return None
    root = backend.base_url.rstrip("/").removesuffix("/v1")
    return root + "/_sim/stats"


async def _sim_stats(url: str | None) -> dict[str, Any] | None:
    if url is None:
        return None
    try:
        async with httpx.AsyncClient(timeout=3) as client:
            reply = await client.get(url)
        data = reply.json() if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return data if isinstance(data, dict) and "disconnects" in data else None


async def _check_row_status(key_id: str, since: Any) -> int | None:
    from responses_api.usage import sink

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            await sink.flush()
        status = await sync_to_async(
            lambda: (
                UsageLog.objects.filter(api_key_id=uuid.UUID(key_id), created_at__gte=since)
                .values_list("status", flat=True)
                .first()
            )
        )()
        if status is not None:
            return status
        await asyncio.sleep(0.2)
    return None


CHECKS: tuple[Check, ...] = (
    check_text,
    check_function_call,
    check_parallel_calls,
    check_custom_tool,
    check_namespace_tool,
    check_reasoning_on,
    check_reasoning_off,
    check_json_schema,
    check_context_window,
    check_cancellation,
)
NAMES = tuple(c.__name__.removeprefix("check_") for c in CHECKS)


# --- running it --------------------------------------------------------------


def resolve(
    org_slug: str, model_id: str, backend_name: str | None
) -> tuple[ServedModel, Backend | None]:
    organisation = Organisation.objects.filter(slug=org_slug).first()
    if organisation is None:
        raise CheckError(f"No organisation {org_slug!r}.")
    model = ServedModel.objects.filter(organisation=organisation, public_id=model_id).first()
    if model is None:
        raise CheckError(f"Organisation {org_slug!r} has no model {model_id!r}.")
    backends = model.backends.all()
    if backend_name:
        backend = backends.filter(name=backend_name).first()
        if backend is None:
            raise CheckError(f"Model {model_id!r} is not deployed on a backend {backend_name!r}.")
        return model, backend
    only = list(backends[:2])
    return model, only[0] if len(only) == 1 else None


async def _run(ctx: Context, only: tuple[str, ...] | None) -> list[Result]:
    results = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        if only and name not in only:
            continue
        try:
            results.append(await check(ctx))
        except Exception as error:  # one broken capability must not hide the others
            results.append(Result(name, False, f"the check itself failed: {error!r}"))
    return results


def run_check(
    org_slug: str,
    model_id: str,
    backend_name: str | None = None,
    *,
    timeout: float = REQUEST_TIMEOUT,
    only: tuple[str, ...] | None = None,
) -> ModelCheck:
    """Run every capability against the model and store the results."""
    from accounts.services import api_key_create, api_key_revoke
    from responses_api.backends.client import close_clients

    model, backend = resolve(org_slug, model_id, backend_name)
    started = timezone.now()
    key, raw = api_key_create(
        organisation=model.organisation,
        name="model check",
        expires_at=started + timedelta(hours=1),
    )
    exchange_module.check_keys.add(str(key.id))
    ctx = Context(
        client=Client(raw, str(backend.id) if backend_name and backend else None, timeout),
        model=model,
        backend=backend,
        key_id=str(key.id),
    )

    async def main() -> list[Result]:
        try:
            return await _run(ctx, only)
        finally:
            from responses_api.usage import sink

            with contextlib.suppress(Exception):
                await sink.flush()
            await close_clients()

    try:
        results = asyncio.run(main())
    finally:
        api_key_revoke(api_key=key)
        exchange_module.check_keys.discard(str(key.id))
    return ModelCheck.objects.create(
        model=model,
        backend=backend,
        started_at=started,
        results=[asdict(r) for r in results],
        passed=all(r.passed for r in results),
    )


def table(check: ModelCheck) -> str:
    """The results as a plain-text table, a failure's raw answer under it."""
    lines = [f"{'capability':<16} {'result':<7} detail"]
    for result in check.results:
        verdict = "skip" if result.get("skipped") else "pass" if result["passed"] else "FAIL"
        lines.append(f"{result['name']:<16} {verdict:<7} {result['detail']}")
        if not result["passed"] and result.get("raw"):
            lines.append(f"{'':<24} raw: {result['raw'][:600]}")
    lines.append(f"{'overall':<16} {'pass' if check.passed else 'FAIL'}")
    return "\n".join(lines)


def as_json(check: ModelCheck) -> dict[str, Any]:
    return {
        "id": check.id,
        "organisation": check.model.organisation.slug,
        "model": check.model.public_id,
        "backend": check.backend.name if check.backend else None,
        "started_at": check.started_at.isoformat(),
        "passed": check.passed,
        "results": check.results,
    }
