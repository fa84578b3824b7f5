"""The output items a stream is writing, and the tool call items they become.

Pure, for ``translate.stream`` and the events it sends (``translate.events``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import orjson

from responses_api.translate.partial_json import StringFieldDecoder
from responses_api.translate.tools import ToolRef


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


@dataclass(slots=True)
class Item:
    """One output item as it is written."""

    kind: str  # message, reasoning, function_call, custom_tool_call, tool_search_call, mcp_call
    output_index: int  # -1 while a call waits for the one before it to be done
    item_id: str
    text: list[str] = field(default_factory=list)
    # tool calls
    call_id: str = ""
    ref: ToolRef | None = None
    chat_name: str = ""
    closed: bool = False
    done_item: dict[str, Any] | None = None
    # custom tool calls: the decoded ``input`` streamed so far
    decoder: StringFieldDecoder | None = None
    streamed: list[str] = field(default_factory=list)
    # A hosted call (``translate.hosted_calls``) closed and not yet run.
    pending: bool = False


def new_call(call_id: str | None, chat_name: str, tools: dict[str, ToolRef]) -> Item:
    """The item a chat tool call becomes, by what its function name stands for."""
    ref = tools.get(chat_name) or ToolRef(kind="function", name=chat_name)
    kind = {"custom": "custom_tool_call", "tool_search": "tool_search_call", "mcp": "mcp_call"}.get(
        ref.kind, "function_call"
    )
    if ref.approval:
        kind = "mcp_approval_request"
    if ref.item is not None:  # a hosted kind's call: its own item type and id prefix
        kind = ref.item[0]
    prefix = {
        "custom_tool_call": "ctc",
        "tool_search_call": "tsc",
        "mcp_call": "mcp",
        "mcp_approval_request": "mcpr",
    }.get(kind, ref.item[1] if ref.item is not None else "fc")
    item = Item(
        kind,
        -1,
        new_id(prefix),
        call_id=call_id or new_id("call"),
        ref=ref,
        chat_name=chat_name,
    )
    if kind == "custom_tool_call":
        item.decoder = StringFieldDecoder("input")
    return item


def append_text(parts: list[str], text: str) -> None:
    """Keep a text that grows by deltas as a few strings, not one per token:
    a thousand long streams held hundreds of small strings each."""
    parts.append(text)
    if len(parts) >= _JOIN_EVERY:
        parts[:] = ["".join(parts)]


_JOIN_EVERY = 64


def call_item(item: Item, status: str, added: bool = False) -> dict[str, Any]:
    """A tool call item as the client gets it (``added``: as it starts)."""
    ref = item.ref
    assert ref is not None
    arguments = "" if added else "".join(item.text)
    if item.kind == "custom_tool_call":
        out: dict[str, Any] = {
            "id": item.item_id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": item.call_id,
            "name": ref.name,
            "input": "" if added else _final_input(item, arguments),
        }
    elif item.kind == "mcp_call":
        # The server is the tool's namespace; output and error come once it ran.
        return {
            "id": item.item_id,
            "type": "mcp_call",
            "status": status,
            "server_label": ref.namespace,
            "name": ref.name,
            "arguments": arguments,
            "output": None,
            "error": None,
            "approval_request_id": None,
        }
    elif item.kind == "mcp_approval_request":
        return {
            "id": item.item_id,
            "type": "mcp_approval_request",
            "server_label": ref.namespace,
            "name": ref.name,
            "arguments": arguments,
        }
    elif item.kind == "tool_search_call":
        out = {
            "id": item.item_id,
            "type": "tool_search_call",
            "status": status,
            "call_id": item.call_id,
            "execution": "client",
            "arguments": {} if added else json_or_raw(arguments),
        }
    else:
        out = {
            "id": item.item_id,
            "type": "function_call",
            "status": status,
            "call_id": item.call_id,
            "name": ref.name,
            "arguments": arguments,
        }
    if ref.namespace and item.kind != "tool_search_call":
        out["namespace"] = ref.namespace
    return out


def _final_input(item: Item, arguments: str) -> str:
    """The custom tool's input; always extends what was already streamed,
    so the deltas concatenate to the ``.done`` input."""
    decoder = item.decoder
    streamed = "".join(item.streamed)
    if decoder is not None and decoder.complete:
        return decoder.text
    whole = custom_input(arguments)
    if whole.startswith(streamed):
        return whole
    # Cut short (finish_reason length) or malformed after a good start:
    # the decoded prefix is the best account of what the model wrote.
    return streamed


def whole_json(parts: list[str]) -> bool:
    """Whether the arguments so far are one whole JSON value (an object,
    as tool arguments are): parsed only when they could be."""
    for piece in reversed(parts):
        tail = piece.rstrip()
        if tail:
            if not tail.endswith("}"):
                return False
            break
    else:
        return False
    text = "".join(parts)
    parts[:] = [text]
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def json_or_raw(text: str) -> Any:
    try:
        return orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return text


def custom_input(arguments: str) -> str:
    """A custom tool's call arrives as ``{"input": "..."}``; unwrap it."""
    value = json_or_raw(arguments)
    if isinstance(value, dict):
        inner = value.get("input")
        if isinstance(inner, str):
            return inner
        if len(value) == 1:
            only = next(iter(value.values()))
            if isinstance(only, str):
                return only
    return arguments if not isinstance(value, str) else value
