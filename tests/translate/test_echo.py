"""The response repeats the request's tools as they were sent."""

from __future__ import annotations

from pathlib import Path

import orjson

from responses_api.protocol.body import CreateResponse
from responses_api.translate.response import echo_settings

CODEX = Path(__file__).resolve().parents[1] / "fixtures" / "codex"


def echoed_tools(tools: list) -> list:
    request = CreateResponse.model_validate({"model": "m", "input": "hi", "tools": tools})
    echo = echo_settings(request, store=False, temperature=None, top_p=None, max_output_tokens=None)
    return echo["tools"]


def test_codex_tools_are_echoed_as_sent_with_strict_on_function_tools():
    tools = orjson.loads((CODEX / "turn1_request.json").read_bytes())["tools"]
    expected = [
        {"strict": True, **tool} if tool["type"] == "function" and "strict" not in tool else tool
        for tool in tools
    ]
    assert echoed_tools(tools) == expected


def test_fields_not_sent_are_not_echoed_and_hosted_tools_keep_theirs():
    assert echoed_tools(
        [
            {"type": "function", "name": "f", "unknown": 1},
            {"type": "function", "name": "g", "strict": False, "parameters": None},
            {"type": "web_search", "search_context_size": "low"},
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "h"}]},
        ]
    ) == [
        {"strict": True, "type": "function", "name": "f"},
        {"type": "function", "name": "g", "strict": False, "parameters": None},
        {"type": "web_search", "search_context_size": "low"},
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "h"}]},
    ]
