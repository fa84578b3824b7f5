"""The tools a request offers and its ``tool_choice``.

Function, custom, namespace and client ``tool_search`` tools are typed here;
any other type is a hosted tool, kept as sent so it can be dropped with a
notice and echoed. ``translate.tools`` turns them into chat tools.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NoReturn

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    InstanceOf,
    StrictBool,
    StrictStr,
    Tag,
    WithJsonSchema,
)

from responses_api.protocol.refusals import OBJECTS, Loose, Strict, refuse

HOSTED_TOOL_TYPES = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "web_search_2025_08_26",
        "file_search",
        "code_interpreter",
        "computer_use",
        "computer_use_preview",
        "computer",
        "image_generation",
        "mcp",
        "local_shell",
        "shell",
        "apply_patch",
    }
)

# A JSON object passed on as it came (a tool's parameter schema): checked to be
# one, not copied key by key.
JsonObject = InstanceOf[dict[str, Any]]


class FunctionTool(Loose):
    type: Literal["function"]
    name: StrictStr = Field(min_length=1, max_length=128)
    description: StrictStr | None = None
    parameters: JsonObject | None = None
    strict: StrictBool | None = None


class CustomTool(Loose):
    type: Literal["custom"]
    name: StrictStr = Field(min_length=1, max_length=128)
    description: StrictStr | None = None
    format: JsonObject | None = None


class NamespaceTool(Loose):
    type: Literal["namespace"]
    name: StrictStr = Field(min_length=1, max_length=64)
    description: StrictStr | None = None
    tools: list[Annotated[FunctionTool | CustomTool, Field(discriminator="type")]]


class ToolSearchTool(Loose):
    type: Literal["tool_search"]
    execution: Literal["server", "client"] | None = None
    description: StrictStr | None = None
    parameters: JsonObject | None = None


class HostedTool(BaseModel):
    """A tool this server does not run (``web_search``, …, or ``tool_search``
    executed by the server): dropped with a notice, echoed as sent."""

    model_config = ConfigDict(extra="allow")

    type: StrictStr


TOOL_TAGS = {
    "function": "FunctionTool",
    "custom": "CustomTool",
    "namespace": "NamespaceTool",
    "tool_search": "ToolSearchTool",
}


def _tool_tag(value: Any) -> str:
    if isinstance(value, dict):
        kind = value.get("type")
        if not isinstance(kind, str):
            return "Refused"
        if kind == "tool_search" and value.get("execution") != "client":
            return "HostedTool"
        # Any other type is a hosted tool: dropped, not refused.
        return TOOL_TAGS.get(kind, "HostedTool")
    return type(value).__name__ if isinstance(value, BaseModel) else "Refused"


def _refuse_tool(value: Any) -> NoReturn:
    if not isinstance(value, dict):
        refuse("Each tool must be an object.")
    refuse("Each tool needs a 'type'.", field="type", code="invalid_request_error")


Tool = Annotated[
    Annotated[FunctionTool, Tag("FunctionTool")]
    | Annotated[CustomTool, Tag("CustomTool")]
    | Annotated[NamespaceTool, Tag("NamespaceTool")]
    | Annotated[ToolSearchTool, Tag("ToolSearchTool")]
    | Annotated[HostedTool, Tag("HostedTool")]
    | Annotated[HostedTool, BeforeValidator(_refuse_tool), Tag("Refused")],
    Discriminator(_tool_tag),
]
Tools = Annotated[list[Tool], WithJsonSchema(OBJECTS)]


class FunctionChoice(Strict):
    type: Literal["function", "custom"]
    name: StrictStr


class HostedChoice(Loose):
    type: StrictStr


class AllowedToolsChoice(Loose):
    """Only some of the tools may be called. Each entry names a tool of the
    request by type and name; ``translate.tools`` checks them against the
    tools and refuses any other, naming the entry (``tool_choice.tools[1]``)."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"] = "auto"
    tools: list[Any] = []
