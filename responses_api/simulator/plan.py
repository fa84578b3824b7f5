"""What the simulator answers, decided from a request before a byte is sent.

The directives of the last user message (listed in ``simulator/server.py``)
and the request's own fields become a *plan*: the words, reasoning and tool
calls to send and how to pace or break the stream. A small prefix cache
gives ``cached_tokens`` as a backend with prompt caching would. No I/O:
the ASGI server (``simulator/server.py``) only carries the plan out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from typing import Any

import orjson

from responses_api.simulator.content import (
    codex_calls,
    freeform_as_json,
    from_schema,
    summary_of,
    thinking_on,
    words_of,
)
from responses_api.translate.compaction import SUMMARY_PROMPT

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "bright",
    "stars",
    "watch",
    "quiet",
    "rivers",
    "carry",
    "silver",
    "light",
    "across",
    "ancient",
    "valleys",
    "toward",
    "distant",
    "hills",
]
REASONING = "Let me think about this step by step before answering."
DIRECTIVE = re.compile(r"\[\[(\w[\w-]*)(?::(.*?))?\]\]", re.S)
CACHE_ENTRIES = 256


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


# The window the simulator reports (``/tokenize``'s ``max_model_len``) and,
# unless told otherwise, enforces, as vLLM does its ``--max-model-len``: the
# embedded default's model declares the same, so its check finds a backend
# that refuses what the model cannot take.
CONTEXT_WINDOW = 32768


def prompt_tokens(messages: list[dict[str, Any]], tools: Any) -> list[str]:
    words: list[str] = []
    for message in messages:
        words.append(f"<{message.get('role')}>")
        words.extend(text_of(message.get("content")).split())
        for call in message.get("tool_calls") or ():
            words.extend(str(call.get("function", {})).split())
    if tools:
        words.extend(orjson.dumps(tools).decode().split())
    return words


def plan_of(request: dict[str, Any], *, breaks: frozenset[str]) -> dict[str, Any]:
    """What to answer and how, from the request and the directives in its last
    user message."""
    messages = request["messages"]
    last = messages[-1]
    last_user: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    directives: dict[str, list[str]] = {}
    for name, value in DIRECTIVE.findall(text_of(last_user.get("content"))):
        directives.setdefault(name, []).append(value)
    max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
    thinking = bool(directives.get("reason")) or thinking_on(request)
    fail = (directives.get("fail-after") or ["-1"])[0].split()
    plan: dict[str, Any] = {
        "reasoning": (directives.get("reason") or [""])[0] or (REASONING if thinking else ""),
        "reasoning_field": (directives.get("reason-field") or ["reasoning_content"])[0],
        "calls": [],
        "interleave": "interleave" in directives,
        "delay": float((directives.get("delay") or ["0"])[0]) / 1000,
        "rate": float((directives.get("rate") or ["0"])[0]),
        "status": int((directives.get("status") or ["0"])[0]),
        "fail_after": int(fail[0]),
        "fail_kind": fail[1] if len(fail) > 1 else "server",
        "drop_after": int((directives.get("drop-after") or ["-1"])[0]),
    }
    response_format = request.get("response_format") or {}
    if last.get("role") == "tool":
        text = f"Tool result: {text_of(last.get('content'))}"
        words = words_of((directives.get("answer") or [text])[0])
    elif text_of(last.get("content")) == SUMMARY_PROMPT:
        words = words_of(summary_of(messages, text_of))
    elif "text" in directives:
        words = words_of(directives["text"][0])
    elif response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        words = words_of(json.dumps(from_schema(schema, schema)))
    elif response_format.get("type") == "json_object":
        words = words_of('{"answer": "the quick brown fox"}')
    else:
        count = int((directives.get("tokens") or ["16"])[0])
        seed = int(hashlib.sha256(text_of(last_user.get("content")).encode()).hexdigest(), 16)
        words = [WORDS[(seed + i) % len(WORDS)] + " " for i in range(count)]
        if words:
            words[-1] = words[-1].rstrip()
    if last.get("role") != "tool":
        tool_names = {t.get("function", {}).get("name") for t in request.get("tools") or ()}
        for value in directives.get("call", ()):
            name, _, arguments = value.strip().partition(" ")
            if name in tool_names:
                plan["calls"].append((name, arguments.strip() or "{}"))
        plan["calls"].extend(codex_calls(directives, tool_names))
        if "freeform-as-json" in directives or "freeform" in breaks:
            plan["calls"] = freeform_as_json(plan["calls"], request.get("tools") or ())
        if plan["calls"]:
            words = []
    finish = "tool_calls" if plan["calls"] else "stop"
    if directives.get("finish"):
        finish = directives["finish"][0]
    if max_tokens is not None and len(words) > max_tokens:
        words = words[:max_tokens]
        finish = "length"
    plan["words"] = words
    plan["finish"] = finish
    return plan


def tokenized(body: bytes) -> tuple[int, dict[str, Any]]:
    """vLLM's ``POST /tokenize`` of a chat request: the prompt tokens its usage reports."""
    try:
        request = orjson.loads(body)
        count = len(prompt_tokens(request["messages"], request.get("tools")))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return 400, {"error": {"message": "messages are required", "type": "invalid_request"}}
    return 200, {"count": count, "max_model_len": CONTEXT_WINDOW, "tokens": []}


class PrefixCache:
    """The prompts processed recently, as tokens, newest last."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, list[str]] = OrderedDict()

    def usage(self, request: dict[str, Any]) -> tuple[int, int]:
        """The prompt's tokens, and how many of them lead a prompt seen recently."""
        tokens = prompt_tokens(request["messages"], request.get("tools"))
        best = 0
        for cached in self.entries.values():
            n = 0
            for a, b in zip(cached, tokens, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        key = hashlib.sha1(" ".join(tokens).encode()).hexdigest()
        self.entries[key] = tokens
        self.entries.move_to_end(key)
        while len(self.entries) > CACHE_ENTRIES:
            self.entries.popitem(last=False)
        return len(tokens), best
