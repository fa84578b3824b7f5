"""One response over several backend calls: the MCP tools the gateway runs.

When a request offers the tools of an MCP server (``{"type": "mcp"}``),
the gateway lists them first (an ``mcp_list_tools`` item per server), the
model calls them as functions, and the gateway runs each call and asks the
model again with the results, until it answers without calling one. All of
it is one response, translated by one :class:`StreamTranslator`: its items
and ``output_index`` go on from call to call, and its usage adds up.

The model's call of an MCP tool becomes an ``mcp_call`` item as it streams
(``translate.items``): its arguments arrive as ``response.mcp_call_arguments``
events and, once whole, the item waits as ``calling``
(:func:`waiting_calls`) until the gateway has run it (:func:`mcp_result`).

Pure, like the rest of ``translate``: the gateway's loop does the I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from responses_api.translate.events import Event
from responses_api.translate.items import Item, new_id
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.token_usage import Usage


@dataclass(frozen=True, slots=True)
class ListedTool:
    """A tool an MCP server listed, as the ``mcp_list_tools`` item shows it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    # Its calls wait for the client's approval (``mcp_approval_request``).
    needs_approval: bool = False

    def shown(self) -> dict[str, Any]:
        tool: dict[str, Any] = {
            "name": self.name,
            "description": self.description or None,
            "input_schema": self.input_schema,
        }
        if self.read_only:
            tool["annotations"] = {"read_only": True}
        return tool


def list_tools(
    translator: StreamTranslator,
    server_label: str,
    tools: Sequence[ListedTool],
    error: str | None = None,
) -> list[Event]:
    """An ``mcp_list_tools`` item, whole: what the server listed (the tools
    the request allows), or why it could not."""
    item = Item("mcp_list_tools", len(translator.items), new_id("mcpl"), closed=True)
    translator.items.append(item)
    done: dict[str, Any] = {
        "id": item.item_id,
        "type": "mcp_list_tools",
        "server_label": server_label,
        "tools": [tool.shown() for tool in tools],
    }
    if error is not None:
        done["error"] = error
    item.done_item = done
    base = {"item_id": item.item_id, "output_index": item.output_index}
    added = {**done, "tools": []}
    return [
        {"type": "response.output_item.added", "output_index": item.output_index, "item": added},
        {"type": "response.mcp_list_tools.in_progress", **base},
        {"type": f"response.mcp_list_tools.{'failed' if error else 'completed'}", **base},
        {"type": "response.output_item.done", "output_index": item.output_index, "item": done},
    ]


def waiting_calls(translator: StreamTranslator) -> list[Item]:
    """The MCP calls the last backend call made, whole, not yet run."""
    return [
        item
        for item in translator.items
        if item.kind == "mcp_call"
        and item.done_item is not None
        and item.done_item["status"] == "calling"
    ]


# JSON-RPC error codes an ``mcp_protocol_error`` names when the gateway, not
# the server, ends a call: the MCP SDK's own values.
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
INVALID_PARAMS = -32602


def protocol_error(code: int, message: str) -> dict[str, Any]:
    """An ``mcp_call`` error: the session failed, or the call was refused,
    with a JSON-RPC error code."""
    return {"type": "mcp_protocol_error", "code": code, "message": message}


def http_error(status: int, message: str) -> dict[str, Any]:
    """An ``mcp_call`` error: the server answered with an HTTP error status."""
    return {"type": "http_error", "code": status, "message": message}


def execution_error(text: str) -> dict[str, Any]:
    """An ``mcp_call`` error: the tool ran and reported a failure
    (``isError``); its content, as the model reads it."""
    return {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}


def mcp_error_text(error: object) -> str:
    """An ``mcp_call`` error as a sentence: the message of a protocol or
    HTTP error, the text of a tool's content; a legacy string as it is."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        if isinstance(message := error.get("message"), str) and message:
            return message
        content = error.get("content")
        blocks = content if isinstance(content, list) else [content]
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
        if texts:
            return "\n".join(texts)
        if isinstance(content, str) and content:
            return content
    return orjson.dumps(error, default=str).decode()


def mcp_result(
    item: Item, *, output: str | None = None, error: dict[str, Any] | None = None
) -> list[Event]:
    """The call has run: its output, or the error object that ended it
    (:func:`protocol_error`, :func:`http_error`, :func:`execution_error`)."""
    assert item.done_item is not None
    done = {
        **item.done_item,
        "status": "failed" if error is not None else "completed",
        "output": output if error is None else None,
        "error": error,
    }
    item.done_item = done
    base = {"item_id": item.item_id, "output_index": item.output_index}
    return [
        {"type": f"response.mcp_call.{'failed' if error is not None else 'completed'}", **base},
        {"type": "response.output_item.done", "output_index": item.output_index, "item": done},
    ]


def mcp_output_text(output: str | None, error: object) -> str:
    """What the model reads as an MCP call's result: its output, or what
    went wrong (an error object, or the string of older responses)."""
    if error is None:
        return output or ""
    return f"The tool call failed: {mcp_error_text(error)}"


def approval_requested(item: Item, approval_id: str) -> list[Event]:
    """A call that waits for the client's approval, announced whole under
    the id that proves it was asked (``store.seal.approval_id``)."""
    assert item.done_item is not None
    item.item_id = approval_id
    done = item.done_item = {**item.done_item, "id": approval_id}
    return [
        {"type": "response.output_item.added", "output_index": item.output_index, "item": done},
        {"type": "response.output_item.done", "output_index": item.output_index, "item": done},
    ]


def approved_call(
    translator: StreamTranslator,
    server_label: str,
    name: str,
    arguments: str,
    approval_request_id: str,
) -> tuple[Item, list[Event]]:
    """An ``mcp_call`` the client approved in a response before this one:
    whole from the start, waiting to be run (:func:`mcp_result`)."""
    item = Item("mcp_call", len(translator.items), new_id("mcp"), closed=True)
    translator.items.append(item)
    item.done_item = {
        "id": item.item_id,
        "type": "mcp_call",
        "status": "calling",
        "server_label": server_label,
        "name": name,
        "arguments": arguments,
        "output": None,
        "error": None,
        "approval_request_id": approval_request_id,
    }
    base = {"item_id": item.item_id, "output_index": item.output_index}
    added = {**item.done_item, "status": "in_progress"}
    return item, [
        {"type": "response.output_item.added", "output_index": item.output_index, "item": added},
        {"type": "response.mcp_call.in_progress", **base},
        {"type": "response.mcp_call_arguments.done", **base, "arguments": arguments},
    ]


def next_call(translator: StreamTranslator) -> None:
    """Ready the translator for the backend's next answer in this response,
    once the items of this one are closed (``close_items``): the items so
    far stay, the state of one answer (its tool-call indexes, finish
    reason, usage) starts again, and the usage so far is kept."""
    output = translator.output_cap
    before, deltas, reasoning = translator.earlier or (Usage(), 0, 0)
    this = translator.usage.final(output.deltas - deltas, output.reasoning_deltas - reasoning)
    translator.earlier = (before.plus(this), output.deltas, output.reasoning_deltas)
    translator.usage = Usage()
    translator.calls = {}
    # The notice of dropped calls speaks of the whole response: those of
    # the answers before stay counted, under indexes no tool call has.
    translator.dropped_calls = set(range(-len(translator.dropped_calls), 0))
    translator.finish_reason = None
