"""The input of a request: a string, or a list of items and their content parts.

Each item type a client may send back is typed here; an item of a hosted
tool is kept only to be skipped with a notice, and any other type is refused
naming it. ``translate.request`` turns the items into chat messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NoReturn

from pydantic import (
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    InstanceOf,
    StrictBool,
    StrictStr,
    Tag,
    WithJsonSchema,
    model_validator,
)

from responses_api.protocol.refusals import OBJECTS, Loose, refuse
from responses_api.protocol.tools import Tool

HOSTED_ITEM_TYPES = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "mcp_list_tools",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
    }
)


# --- content parts ----------------------------------------------------------


class TextPart(Loose):
    type: Literal["input_text", "output_text", "text", "summary_text", "reasoning_text"]
    text: StrictStr


class RefusalPart(Loose):
    type: Literal["refusal"]
    refusal: StrictStr


class ImagePart(Loose):
    type: Literal["input_image"]
    image_url: StrictStr | None = None
    file_id: StrictStr | None = None
    detail: Literal["auto", "low", "high", "original"] | None = None

    @model_validator(mode="after")
    def _inline_only(self) -> ImagePart:
        # A file_id names a file of the organisation: read before translation
        # (``files.inline``), which gives the image as a data: URL.
        if self.file_id is not None:
            if self.image_url is not None:
                raise ValueError("input_image takes image_url or file_id, not both")
            return self
        if self.image_url is None:
            raise ValueError("input_image needs image_url (a data: URL) or file_id")
        if not self.image_url.startswith("data:"):
            raise ValueError(
                "Only inline data: URLs are accepted for input_image; the server never fetches URLs"
            )
        return self


class FilePart(Loose):
    type: Literal["input_file"]
    filename: StrictStr | None = None
    file_data: StrictStr | None = None
    file_id: StrictStr | None = None
    file_url: StrictStr | None = None

    @model_validator(mode="after")
    def _inline_only(self) -> FilePart:
        if self.file_url is not None:
            raise ValueError(
                "Only inline files (file_data, base64) or file_id are accepted for input_file"
            )
        if self.file_id is not None:
            if self.file_data is not None:
                raise ValueError("input_file takes file_data or file_id, not both")
            return self
        if self.file_data is None:
            raise ValueError("input_file needs file_data (base64) and filename, or file_id")
        return self


ContentPart = Annotated[TextPart | RefusalPart | ImagePart | FilePart, Field(discriminator="type")]


# --- input items ------------------------------------------------------------


class MessageItem(Loose):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: StrictStr | list[ContentPart]
    id: StrictStr | None = None


class _Call(Loose):
    """A call the model made to one of the client's tools, named as the
    client knows it (a name, and the namespace of a namespace tool)."""

    type: StrictStr
    call_id: StrictStr
    name: StrictStr


class FunctionCallItem(_Call):
    type: Literal["function_call"]
    arguments: StrictStr = ""
    namespace: StrictStr | None = None
    id: StrictStr | None = None


class CustomToolCallItem(_Call):
    type: Literal["custom_tool_call"]
    input: StrictStr = ""
    namespace: StrictStr | None = None


class _CallOutput(Loose):
    """What the client's tool returned for a call; both kinds of call take
    the same output."""

    type: StrictStr
    call_id: StrictStr
    output: StrictStr | list[ContentPart]


class FunctionCallOutputItem(_CallOutput):
    type: Literal["function_call_output"]


class CustomToolCallOutputItem(_CallOutput):
    type: Literal["custom_tool_call_output"]


class ToolSearchCallItem(Loose):
    type: Literal["tool_search_call"]
    call_id: StrictStr | None = None
    id: StrictStr | None = None
    arguments: Any = None


class ToolSearchOutputItem(Loose):
    type: Literal["tool_search_output"]
    call_id: StrictStr | None = None
    # Tools the client loaded; they become callable.
    tools: list[Tool] = []


class ReasoningItem(Loose):
    type: Literal["reasoning"]
    content: list[TextPart] | None = None
    summary: list[TextPart] = []
    encrypted_content: StrictStr | None = None


class ItemReference(Loose):
    type: Literal["item_reference"]
    id: StrictStr


class CompactionItem(Loose):
    """A conversation compacted by this server: its summary, sealed
    (``translate.compaction``)."""

    # Codex also names the item ``context_compaction`` in the history it replays.
    type: Literal["compaction", "context_compaction"]
    encrypted_content: StrictStr
    id: StrictStr | None = None


class CompactionTriggerItem(Loose):
    """Asks for the conversation before it to be compacted; last in ``input``."""

    type: Literal["compaction_trigger"]


class McpCallItem(Loose):
    """A call the gateway ran on an MCP server, sent back as history: the
    model reads it as its own tool call and that call's result."""

    type: Literal["mcp_call"]
    id: StrictStr | None = Field(default=None, max_length=128)
    server_label: StrictStr = Field(min_length=1, max_length=64)
    name: StrictStr = Field(min_length=1, max_length=128)
    arguments: StrictStr = ""
    output: StrictStr | None = None
    # A string, or the object some clients keep.
    error: StrictStr | InstanceOf[dict[str, Any]] | None = None
    # The approval request it answers, for a call that waited for approval.
    approval_request_id: StrictStr | None = Field(default=None, max_length=128)


class McpApprovalRequestItem(Loose):
    """A call the model made that waited for the client's approval; its id
    proves this server asked it (``store.seal.approval_id``)."""

    type: Literal["mcp_approval_request"]
    id: StrictStr = Field(max_length=128)
    server_label: StrictStr = Field(min_length=1, max_length=64)
    name: StrictStr = Field(min_length=1, max_length=128)
    arguments: StrictStr = ""


class McpApprovalResponseItem(Loose):
    """The client's answer to an approval request."""

    type: Literal["mcp_approval_response"]
    approval_request_id: StrictStr = Field(max_length=128)
    approve: StrictBool
    id: StrictStr | None = Field(default=None, max_length=128)
    reason: StrictStr | None = Field(default=None, max_length=4096)


class HostedItem(Loose):
    """An item of a hosted tool (``code_interpreter_call``, …): skipped with a
    notice. The schema lists the types no class of their own takes, so that
    an item matches one schema of the union only."""

    type: Annotated[
        StrictStr,
        WithJsonSchema(
            {"enum": sorted(HOSTED_ITEM_TYPES - {"web_search_call", "file_search_call"})}
        ),
    ]


class WebSearchCallItem(HostedItem):
    """A web search of an earlier response: given back to the model where
    the organisation runs web search (its query and the sources it shows),
    else skipped with a notice like any hosted item."""

    type: Literal["web_search_call"]
    id: StrictStr | None = Field(default=None, max_length=128)
    status: StrictStr | None = Field(default=None, max_length=32)
    action: InstanceOf[dict[str, Any]] | None = None


class FileSearchCallItem(HostedItem):
    """A file search of an earlier response: given back to the model where
    the request offers ``file_search`` (its queries and the results it
    shows), else skipped with a notice like any hosted item."""

    type: Literal["file_search_call"]
    id: StrictStr | None = Field(default=None, max_length=128)
    status: StrictStr | None = Field(default=None, max_length=32)
    queries: InstanceOf[list[Any]] | None = None
    results: InstanceOf[list[Any]] | None = None


ITEM_TAGS = {
    "message": "MessageItem",
    "function_call": "FunctionCallItem",
    "function_call_output": "FunctionCallOutputItem",
    "custom_tool_call": "CustomToolCallItem",
    "custom_tool_call_output": "CustomToolCallOutputItem",
    "tool_search_call": "ToolSearchCallItem",
    "tool_search_output": "ToolSearchOutputItem",
    "reasoning": "ReasoningItem",
    "item_reference": "ItemReference",
    "compaction": "CompactionItem",
    "context_compaction": "CompactionItem",
    "compaction_trigger": "CompactionTriggerItem",
    **dict.fromkeys(HOSTED_ITEM_TYPES, "HostedItem"),
    "web_search_call": "WebSearchCallItem",
    "file_search_call": "FileSearchCallItem",
    "mcp_call": "McpCallItem",
    "mcp_approval_request": "McpApprovalRequestItem",
    "mcp_approval_response": "McpApprovalResponseItem",
}


def _item_tag(value: Any) -> str:
    if isinstance(value, dict):
        kind = value.get("type")
        if kind is None and "role" in value:
            return "MessageItem"  # OpenAI accepts a message without its type
        return ITEM_TAGS.get(kind, "Refused") if isinstance(kind, str) else "Refused"
    return type(value).__name__ if isinstance(value, BaseModel) else "Refused"


def _refuse_item(value: Any) -> NoReturn:
    if not isinstance(value, dict):
        refuse("Each input item must be an object.")
    kind = value.get("type")
    if not isinstance(kind, str):
        refuse("Each input item needs a 'type'.", field="type", code="invalid_request_error")
    refuse(
        "Invalid value: '{kind}'. Input items of type '{kind}' are not supported.",
        field="type",
        kind=kind,
    )


InputItem = Annotated[
    Annotated[MessageItem, Tag("MessageItem")]
    | Annotated[FunctionCallItem, Tag("FunctionCallItem")]
    | Annotated[FunctionCallOutputItem, Tag("FunctionCallOutputItem")]
    | Annotated[CustomToolCallItem, Tag("CustomToolCallItem")]
    | Annotated[CustomToolCallOutputItem, Tag("CustomToolCallOutputItem")]
    | Annotated[ToolSearchCallItem, Tag("ToolSearchCallItem")]
    | Annotated[ToolSearchOutputItem, Tag("ToolSearchOutputItem")]
    | Annotated[ReasoningItem, Tag("ReasoningItem")]
    | Annotated[ItemReference, Tag("ItemReference")]
    | Annotated[CompactionItem, Tag("CompactionItem")]
    | Annotated[CompactionTriggerItem, Tag("CompactionTriggerItem")]
    | Annotated[McpCallItem, Tag("McpCallItem")]
    | Annotated[McpApprovalRequestItem, Tag("McpApprovalRequestItem")]
    | Annotated[McpApprovalResponseItem, Tag("McpApprovalResponseItem")]
    | Annotated[WebSearchCallItem, Tag("WebSearchCallItem")]
    | Annotated[FileSearchCallItem, Tag("FileSearchCallItem")]
    | Annotated[HostedItem, Tag("HostedItem")]
    | Annotated[HostedItem, BeforeValidator(_refuse_item), Tag("Refused")],
    Discriminator(_item_tag),
]

MAX_INPUT_ITEMS = 10_000


def _item_count(value: Any) -> Any:
    # Counted before any item is validated.
    if isinstance(value, list) and len(value) > MAX_INPUT_ITEMS:
        refuse(f"input holds at most {MAX_INPUT_ITEMS} items.", code="invalid_request_error")
    return value


Input = Annotated[
    Annotated[StrictStr, Tag("str")]
    | Annotated[list[InputItem], BeforeValidator(_item_count), Tag("list")],
    # Only the matching form reports errors: a bad item is not also "not a string".
    Discriminator(lambda value: "str" if isinstance(value, str) else "list"),
    WithJsonSchema({"anyOf": [{"type": "string"}, OBJECTS]}),
]
