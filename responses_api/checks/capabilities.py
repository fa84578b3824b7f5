"""The capabilities Codex relies on, one check each: text, tool calls, reasoning...

Each check is one or two small requests through the API's own application
(``checks/client.py``) and a verdict on what came back. The prompts are
natural instructions a real model can follow, with the simulator's
directives (``[[call:...]]``) beside them so the simulator answers the same
way. Running them, and keeping the results, is ``checks/model_check.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from responses_api.backends.client import BackendError, get
from responses_api.catalogue.addresses import AddressPolicy, backend_policy
from responses_api.checks.client import Answer, Check, Context, Result, completed, fail
from responses_api.models import Backend, UsageLog

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


async def _ask_for_call(ctx: Context, tool: dict[str, Any], prompt: str, **body: Any) -> Answer:
    """A turn that must end in a call of ``tool``, as Codex's turns mostly do."""
    return await ctx.ask(input=prompt, tools=[tool], tool_choice="required", **body)


async def check_text(ctx: Context) -> Result:
    name = "text"
    answer = await ctx.ask(
        input="Say hello in one short sentence. [[tokens:8]]", max_output_tokens=64
    )
    if why := completed(answer):
        return fail(name, why, answer)
    deltas = "".join(
        e.get("delta", "") for e in answer.events if e.get("type") == "response.output_text.delta"
    )
    if not answer.text() or deltas != answer.text():
        return fail(name, "no streamed text, or deltas differ from the final text", answer)
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
    first = await _ask_for_call(ctx, WEATHER_TOOL, question, max_output_tokens=128)
    if why := completed(first):
        return fail(name, why, first)
    call = _weather_call(first)
    if call is None:
        return fail(name, "no get_weather call", first)
    try:
        arguments = json.loads(call.get("arguments") or "")
    except ValueError:
        return fail(name, "the call's arguments are not JSON", first)
    if not isinstance(arguments, dict) or "city" not in arguments:
        return fail(name, "the call's arguments have no city", first)
    second = await ctx.ask(
        input=[
            {"role": "user", "content": question},
            {k: call[k] for k in ("type", "call_id", "name", "arguments")},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny, 21 C"},
        ],
        tools=[WEATHER_TOOL],
        max_output_tokens=128,
    )
    if why := completed(second):
        return fail(name, f"round trip: {why}", second)
    if not second.text():
        return fail(name, "round trip: no text after the tool's output", second)
    return Result(name, True, f"called with {arguments}; answered after the output")


async def check_parallel_calls(ctx: Context) -> Result:
    name = "parallel_calls"
    answer = await _ask_for_call(
        ctx,
        WEATHER_TOOL,
        "What is the weather in Paris and in London? Call get_weather twice at once, "
        'once per city. [[call:get_weather {"city":"Paris"}]] '
        '[[call:get_weather {"city":"London"}]] [[interleave]]',
        parallel_tool_calls=True,
        max_output_tokens=256,
    )
    if why := completed(answer):
        return fail(name, why, answer)
    calls = [c for c in answer.output("function_call") if c.get("name") == "get_weather"]
    if len(calls) < 2:
        return fail(name, f"{len(calls)} get_weather call(s), not 2", answer)
    if len({c.get("call_id") for c in calls}) != len(calls):
        return fail(name, "the calls share a call_id", answer)
    return Result(name, True, f"{len(calls)} calls")


async def check_custom_tool(ctx: Context) -> Result:
    name = "custom_tool"
    answer = await _ask_for_call(
        ctx,
        APPLY_PATCH_TOOL,
        "Create the file hello.txt holding the single line hello, with the apply_patch "
        "tool. Its input is the raw patch:\n" + PATCH + "[[write:hello.txt hello]]",
        max_output_tokens=256,
    )
    if why := completed(answer):
        return fail(name, why, answer)
    calls = [c for c in answer.output("custom_tool_call") if c.get("name") == "apply_patch"]
    if not calls:
        return fail(name, "no apply_patch custom tool call", answer)
    text = calls[0].get("input", "")
    deltas = "".join(
        e.get("delta", "")
        for e in answer.events
        if e.get("type") == "response.custom_tool_call_input.delta"
    )
    if deltas != text:
        return fail(name, "the streamed input differs from the final input", answer)
    with contextlib.suppress(ValueError):
        if isinstance(json.loads(text), dict | list | str):
            return fail(name, "the input is JSON-wrapped, not the raw patch", answer)
    stripped = text.strip()
    if not (stripped.startswith("*** Begin Patch") and stripped.endswith("*** End Patch")):
        return fail(name, "the input is not an apply_patch patch", answer)
    if "hello.txt" not in text:
        return fail(name, "the patch does not add hello.txt", answer)
    return Result(name, True, f"{len(text)} characters of patch")


async def check_namespace_tool(ctx: Context) -> Result:
    name = "namespace_tool"
    answer = await _ask_for_call(
        ctx,
        NAMESPACE_TOOL,
        'What is tomorrow\'s forecast for Paris? Call weather.get_forecast with city "Paris". '
        '[[call:weather__get_forecast {"city":"Paris"}]]',
        max_output_tokens=128,
    )
    if why := completed(answer):
        return fail(name, why, answer)
    calls = answer.output("function_call")
    if not any(c.get("name") == "get_forecast" and c.get("namespace") == "weather" for c in calls):
        return fail(name, "no get_forecast call in the weather namespace", answer)
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
        return fail(name, f"HTTP {answer.status}", answer)
    reasoning = answer.output("reasoning")
    details = (answer.response.get("usage") or {}).get("output_tokens_details") or {}
    if not reasoning and not details.get("reasoning_tokens"):
        return fail(name, "no reasoning item and no reasoning tokens", answer)
    return Result(name, True, f"{details.get('reasoning_tokens', 0)} reasoning tokens")


async def check_reasoning_off(ctx: Context) -> Result:
    name = "reasoning_off"
    answer = await ctx.ask(input="Say hi. [[tokens:4]]", max_output_tokens=64)
    if why := completed(answer):
        return fail(name, why, answer)
    if answer.output("reasoning"):
        return fail(name, "a reasoning item although reasoning was not asked for", answer)
    if not answer.text():
        return fail(name, "no text", answer)
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
    if why := completed(answer):
        return fail(name, why, answer)
    try:
        document = json.loads(answer.text())
    except ValueError as error:
        return fail(name, f"not JSON: {str(error)[:200]}", answer)
    if not (
        isinstance(document, dict)
        and set(document) == {"city", "sunny"}
        and isinstance(document["city"], str)
        and isinstance(document["sunny"], bool)
    ):
        return fail(name, "the JSON does not match the schema", answer)
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
        return fail(name, f"{window // 2} words were refused: HTTP {near.status}", near)
    past = await ctx.ask(input="Say ok. " + "the " * (window * 2), max_output_tokens=8)
    code = past.error().get("code")
    if past.status != 400 or code != "context_length_exceeded":
        return fail(
            name, f"past the window: HTTP {past.status} {code}, not context_length_exceeded", past
        )
    return Result(name, True, f"near {window} accepted, past it context_length_exceeded")


async def check_cancellation(ctx: Context) -> Result:
    name = "cancellation"
    stats_url = _sim_stats_url(ctx.backend)
    # The backend's own address policy: the check reaches nothing its
    # requests could not.
    policy = backend_policy(allow_private=bool(ctx.backend and ctx.backend.allow_private))
    before = await _sim_stats(stats_url, policy)
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
        return fail(name, "the stream ended before any text: nothing to cancel", answer)
    if before is not None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            after = await _sim_stats(stats_url, policy)
            if after is not None and after["disconnects"] > before["disconnects"]:
                return Result(name, True, "the backend saw the disconnect")
            await asyncio.sleep(0.1)
        return fail(name, "the backend's disconnect counter did not move", answer)
    status = await _check_row_status(ctx.key_id, started)
    if status != 499:
        return fail(name, f"the request's usage row is {status}, not 499", answer)
    return Result(name, True, "the request ended as 499, the upstream request aborted")


def _sim_stats_url(backend: Backend | None) -> str | None:
    if backend is None:
        return None
    return backend.base_url.rstrip("/").removesuffix("/v1")


async def _sim_stats(root: str | None, policy: AddressPolicy) -> dict[str, Any] | None:
    """The simulator's counters, when the backend is one."""
    if root is None:
        return None
    try:
        status, data, _ = await get(root, "/_sim/stats", api_key="", within=3, policy=policy)
    except BackendError:
        return None
    return data if status == 200 and isinstance(data, dict) and "disconnects" in data else None


async def _check_row_status(key_id: str, since: Any) -> int | None:
    from responses_api.usage.sink import sink

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
