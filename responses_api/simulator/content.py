"""What the simulator backend says: tool calls, JSON from a schema, usage.

Pure functions for ``simulator/plan.py`` and ``simulator/server.py`` (no I/O, no Django).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson


class Stop(Exception):
    pass


FAILURES = {
    "server": {"message": "simulated failure mid-stream", "type": "server_error"},
    "rate_limit": {
        "message": "simulated rate limit mid-stream",
        "type": "rate_limit_error",
        "code": "rate_limit_exceeded",
    },
    "invalid_prompt": {
        "message": "simulated invalid prompt",
        "type": "invalid_request_error",
        "code": "invalid_prompt",
    },
}


def call_deltas(calls: list[tuple[str, str]], cid: str, interleave: bool):
    """The chat deltas of ``calls``: ``(delta, counts_as_a_token)``.

    Arguments arrive in 7-character pieces, as real servers send them (cut
    anywhere, escapes included). Sequential by default (vLLM, SGLang);
    interleaved across calls on request, to exercise clients' bookkeeping.
    """
    heads = []
    pieces = []
    for index, (name, arguments) in enumerate(calls):
        call_id = f"call_{hashlib.sha1(f'{cid}{index}'.encode()).hexdigest()[:12]}"
        heads.append(
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        )
        pieces.append(list(pieces_of(arguments, 7)))
    if not interleave:
        for index, head in enumerate(heads):
            yield {"tool_calls": [head]}, False
            for piece in pieces[index]:
                yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, True
        return
    for head in heads:
        yield {"tool_calls": [head]}, False
    for step in range(max((len(p) for p in pieces), default=0)):
        for index, own in enumerate(pieces):
            if step < len(own):
                delta = {"index": index, "function": {"arguments": own[step]}}
                yield {"tool_calls": [delta]}, True


def codex_calls(directives: dict[str, list[str]], tool_names: set[Any]) -> list[tuple[str, str]]:
    """Calls of Codex's tools asked for by ``[[exec:...]]``, ``[[edit:...]]``
    and ``[[write:...]]``; only when the request offers the tool."""
    calls = []
    for command in directives.get("exec", ()):
        if "exec_command" in tool_names:
            # login=false runs `bash -c` instead of a login shell: faster, no profile.
            arguments = {"cmd": command.strip(), "login": False}
            calls.append(("exec_command", orjson.dumps(arguments).decode()))
    if "apply_patch" in tool_names:
        for value in directives.get("edit", ()):
            path, _, change = value.strip().partition(" ")
            old, _, new = change.partition("=>")
            patch = (
                f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old.strip()}\n"
                f"+{new.strip()}\n*** End Patch\n"
            )
            calls.append(("apply_patch", orjson.dumps({"input": patch}).decode()))
        for value in directives.get("write", ()):
            path, _, text = value.strip().partition(" ")
            lines = "".join(f"+{line}\n" for line in text.split("\\n"))
            patch = f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"
            calls.append(("apply_patch", orjson.dumps({"input": patch}).decode()))
    return calls


def freeform_as_json(calls: list[tuple[str, str]], tools: Any) -> list[tuple[str, str]]:
    """``calls`` as a broken server sends them: a freeform tool's input (a
    function whose one parameter is ``input``) wrapped in JSON once more."""
    freeform = {
        t.get("function", {}).get("name")
        for t in tools
        if set((t.get("function", {}).get("parameters") or {}).get("properties") or ()) == {"input"}
    }
    out = []
    for name, arguments in calls:
        if name in freeform:
            arguments = orjson.dumps({"input": arguments}).decode()
        out.append((name, arguments))
    return out


def from_schema(schema: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """A deterministic JSON value valid against ``schema`` (the subset of JSON
    Schema that structured outputs use: objects, arrays, enums, $ref, anyOf)."""
    if not isinstance(schema, dict) or depth > 12:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return from_schema(target, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return from_schema(schema[key][0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: from_schema(sub, root, depth + 1) for name, sub in props.items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems") or 1))
        return [from_schema(schema.get("items") or {}, root, depth + 1) for _ in range(count)]
    if kind == "string":
        return "the quick brown fox"
    if kind == "integer":
        return int(schema.get("minimum") or 7)
    if kind == "number":
        return float(schema.get("minimum") or 1.5)
    if kind == "boolean":
        return True
    return None


def thinking_on(request: dict[str, Any]) -> bool:
    kwargs = request.get("chat_template_kwargs") or {}
    if kwargs.get("enable_thinking") or request.get("think") is True:
        return True
    return (
        request.get("reasoning_effort") in {"low", "medium", "high"}
        and kwargs.get("enable_thinking") is not False
    )


def words_of(text: str) -> list[str]:
    parts = re.findall(r"\S+\s*|\s+", text)
    return parts or ([text] if text else [])


def pieces_of(text: str, size: int):
    for i in range(0, len(text), size):
        yield text[i : i + size]


def usage_of(prompt: int, cached: int, completion: int, reasoning: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


DIRECTIVES = re.compile(r"\[\[[^\]]*\]\]")


def summary_of(messages: list[dict[str, Any]], text_of: Any) -> str:
    """What the simulator writes when asked to summarise (the compaction
    prompt, ``translate.compaction.SUMMARY_PROMPT``): the user's requests,
    without their directives (a summary carries no instruction to the
    simulator), and what the tools answered."""
    asked: list[str] = []
    results: list[str] = []
    for message in messages[:-1]:
        text = " ".join(DIRECTIVES.sub(" ", text_of(message.get("content"))).split())
        if message.get("role") == "user" and text:
            asked.append(text[:200])
        elif message.get("role") == "tool":
            results.append(text[:120])
    summary = "The user asked: " + ("; ".join(asked) or "nothing yet") + "."
    if results:
        summary += f" {len(results)} tool call(s) ran; the last returned: {results[-1]}."
    return summary + " Next: answer the user's last request."
