"""A request's input items as the chat messages a backend reads: its history.

Each item a client may send back becomes what the model would have seen
when it was made: its own messages, its tool calls and their results, its
reasoning (opened from the seal it was carried in), and the calls the
gateway ran for it on MCP servers, its web searches where one is bound
(their query and sources), and its file searches where the request offers
``file_search`` (their queries and results). Hosted tools' other items are skipped,
with a notice (``request.prepare_chat``).
"""

from __future__ import annotations

from typing import Any

import orjson

from responses_api.protocol.errors import invalid
from responses_api.protocol.items import (
    CompactionItem,
    CompactionTriggerItem,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FileSearchCallItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    HostedItem,
    InputItem,
    ItemReference,
    McpApprovalRequestItem,
    McpApprovalResponseItem,
    McpCallItem,
    MessageItem,
    ReasoningItem,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    WebSearchCallItem,
)
from responses_api.protocol.tools import Tool
from responses_api.translate.content import text_of, user_content
from responses_api.translate.file_search_calls import files_searched_again
from responses_api.translate.hosted_calls import replayed_kind, searched_again
from responses_api.translate.messages import ChatMessages
from responses_api.translate.sealing import ReasoningSeal, SealBroken
from responses_api.translate.tool_turns import mcp_output_text
from responses_api.translate.tools import ChatTools

# Items of hosted tools that hold nothing the model said or was told: a
# server's tool list (offered anew as tools). The approval exchange is not
# either: a call approved is in the history as its ``mcp_call``.
_NOT_FOR_THE_MODEL = frozenset({"mcp_list_tools"})


def add_item(
    item: InputItem,
    index: int,
    messages: ChatMessages,
    tools: ChatTools,
    vision: bool,
    skipped: list[str],
    seal: ReasoningSeal | None,
) -> None:
    if isinstance(item, MessageItem):
        if item.role in {"system", "developer"}:
            messages.system.append(text_of(item.content))
        elif item.role == "assistant":
            messages.add_assistant(item.content)
        else:
            param = f"input[{index}].content"
            messages.add_user(user_content(item.content, param, vision=vision))
    elif isinstance(item, FunctionCallItem):
        messages.add_call(
            {
                "id": item.call_id,
                "type": "function",
                "function": {
                    "name": tools.chat_name_for(item.name, item.namespace),
                    "arguments": item.arguments or "{}",
                },
            }
        )
    elif isinstance(item, CustomToolCallItem):
        messages.add_call(
            {
                "id": item.call_id,
                "type": "function",
                "function": {
                    "name": tools.chat_name_for(item.name, item.namespace),
                    "arguments": orjson.dumps({"input": item.input}).decode(),
                },
            }
        )
    elif isinstance(item, ToolSearchCallItem):
        arguments = item.arguments if item.arguments is not None else {}
        messages.add_call(
            {
                "id": item.call_id or item.id or f"call_ts_{index}",
                "type": "function",
                "function": {
                    "name": tools.chat_name_for("tool_search", None),
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else orjson.dumps(arguments).decode(),
                },
            }
        )
    elif isinstance(item, McpCallItem):
        call_id = item.id or f"call_mcp_{index}"
        messages.add_call(
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": tools.chat_name_for(item.name, item.server_label),
                    "arguments": item.arguments or "{}",
                },
            }
        )
        messages.add_tool_result(call_id, mcp_output_text(item.output, item.error))
    elif isinstance(item, FunctionCallOutputItem | CustomToolCallOutputItem):
        messages.add_tool_result(item.call_id, text_of(item.output))
    elif isinstance(item, ToolSearchOutputItem):
        summary = [tool_summary(tool) for tool in item.tools]
        messages.add_tool_result(item.call_id or "", orjson.dumps(summary).decode())
    elif isinstance(item, ReasoningItem):
        if item.encrypted_content:
            text = unsealed(item.encrypted_content, seal, index)
        else:
            text = "".join(p.text for p in item.content or item.summary)
        if text:
            messages.pending_reasoning.append(text)
    elif isinstance(item, ItemReference):
        raise invalid(
            "item_reference needs a stored response; this organisation stores nothing.",
            param=f"input[{index}]",
        )
    elif isinstance(item, McpApprovalRequestItem | McpApprovalResponseItem):
        pass
    elif isinstance(item, HostedItem):
        search = None
        if isinstance(item, WebSearchCallItem):
            search = tools.hosted_name(replayed_kind(item.model_dump()))
            again = searched_again
        elif isinstance(item, FileSearchCallItem):
            search, again = tools.hosted_name("file_search"), files_searched_again
        if search is not None:
            call_id, arguments, result = again(item.model_dump(), index)
            result = tools.results.get(call_id, result)
            messages.add_call(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": search, "arguments": arguments},
                }
            )
            messages.add_tool_result(call_id, result)
        elif item.type not in _NOT_FOR_THE_MODEL:
            skipped.append(item.type)
    elif isinstance(item, CompactionItem | CompactionTriggerItem):
        # Opened before translation (``translate.compaction.resolve``); never dropped.
        raise invalid(f"input[{index}] was not compacted here.", param=f"input[{index}]")


def tool_summary(tool: Tool) -> dict[str, Any]:
    """What a loaded tool is, as the model is told it was found."""
    summary: dict[str, Any] = {"type": tool.type}
    for key in ("name", "description"):
        value = getattr(tool, key, None)
        if value is not None:
            summary[key] = value
    return summary


def unsealed(token: str, seal: ReasoningSeal | None, index: int) -> str:
    """The reasoning a client carried back sealed. It is what the model
    thought, exactly, so it wins over any plaintext beside it; a token that
    does not open is refused, never dropped: the model would lose its train
    of thought without anyone knowing."""
    try:
        if seal is None:
            raise SealBroken("no seal")
        return seal.open(token)
    except SealBroken:
        raise invalid(
            f"The encrypted_content of input[{index}] could not be verified: it was altered, "
            "or it was issued for another organisation. Send the reasoning item back as it "
            "was received.",
            param=f"input[{index}].encrypted_content",
            code="invalid_encrypted_content",
        ) from None
