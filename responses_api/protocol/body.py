"""The request body of ``POST /v1/responses``, validated once at the edge.

The README ("Responses API compatibility") says what each field does.
Unknown top-level fields are refused
(``extra="forbid"``); input items and tools ignore fields they don't know,
because clients such as Codex send back items exactly as the server emitted
them, with ids and nulls. This module imports neither Django nor httpx.
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
    StrictInt,
    StrictStr,
    Tag,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
THINKING_ON = frozenset({"low", "medium", "high", "xhigh"})

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
HOSTED_ITEM_TYPES = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "compaction",
    }
)


# The largest integer a backend's token and count fields take (int32).
MAX_INT = 2**31 - 1


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


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
        if self.file_id is not None:
            raise ValueError(
                "file_id images are not supported: send the image inline as a data: URL"
            )
        if self.image_url is None:
            raise ValueError("input_image needs image_url (a data: URL)")
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
        if self.file_id is not None or self.file_url is not None:
            raise ValueError("Only inline files (file_data, base64) are accepted for input_file")
        if self.file_data is None:
            raise ValueError("input_file needs file_data (base64) and filename")
        return self


ContentPart = Annotated[TextPart | RefusalPart | ImagePart | FilePart, Field(discriminator="type")]


# --- tools ------------------------------------------------------------------

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


# Tools and input items are discriminated by ``type`` through a function, not
# a field name: a message may come without ``type`` (``{"role": "user", …}``),
# a hosted tool's or item's type is any of many, and what is refused gets a
# message naming it (the "Refused" member only ever raises). Tags are the
# class names, which never read as part of a client's parameter path
# (``errors.from_validation_error``).

# The pydantic error type of a refusal whose message is written for the client;
# its context names the sub-field (``field``) and the error ``code``.
REFUSED = "request_refused"


def _refuse(
    message: str, *, field: str | None = None, code: str = "invalid_value", **ctx: Any
) -> NoReturn:
    """Refuse with a 400 whose message is written for the client."""
    raise PydanticCustomError(REFUSED, message, {"field": field, "code": code, **ctx})


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
        _refuse("Each tool must be an object.")
    _refuse("Each tool needs a 'type'.", field="type", code="invalid_request_error")


Tool = Annotated[
    Annotated[FunctionTool, Tag("FunctionTool")]
    | Annotated[CustomTool, Tag("CustomTool")]
    | Annotated[NamespaceTool, Tag("NamespaceTool")]
    | Annotated[ToolSearchTool, Tag("ToolSearchTool")]
    | Annotated[HostedTool, Tag("HostedTool")]
    | Annotated[HostedTool, BeforeValidator(_refuse_tool), Tag("Refused")],
    Discriminator(_tool_tag),
]


# --- input items ------------------------------------------------------------


class MessageItem(Loose):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: StrictStr | list[ContentPart]
    id: StrictStr | None = None


class FunctionCallItem(Loose):
    type: Literal["function_call"]
    call_id: StrictStr
    name: StrictStr
    arguments: StrictStr = ""
    namespace: StrictStr | None = None
    id: StrictStr | None = None


class FunctionCallOutputItem(Loose):
    type: Literal["function_call_output"]
    call_id: StrictStr
    output: StrictStr | list[ContentPart]


class CustomToolCallItem(Loose):
    type: Literal["custom_tool_call"]
    call_id: StrictStr
    name: StrictStr
    input: StrictStr = ""
    namespace: StrictStr | None = None


class CustomToolCallOutputItem(Loose):
    type: Literal["custom_tool_call_output"]
    call_id: StrictStr
    output: StrictStr | list[ContentPart]


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


class HostedItem(Loose):
    """An item of a hosted tool (``web_search_call``, …): skipped with a notice."""

    type: StrictStr


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
    **dict.fromkeys(HOSTED_ITEM_TYPES, "HostedItem"),
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
        _refuse("Each input item must be an object.")
    kind = value.get("type")
    if not isinstance(kind, str):
        _refuse("Each input item needs a 'type'.", field="type", code="invalid_request_error")
    _refuse(
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
    | Annotated[HostedItem, Tag("HostedItem")]
    | Annotated[HostedItem, BeforeValidator(_refuse_item), Tag("Refused")],
    Discriminator(_item_tag),
]

MAX_INPUT_ITEMS = 10_000


def _item_count(value: Any) -> Any:
    # Counted before any item is validated.
    if isinstance(value, list) and len(value) > MAX_INPUT_ITEMS:
        _refuse(f"input holds at most {MAX_INPUT_ITEMS} items.", code="invalid_request_error")
    return value


# The OpenAPI document keeps items and tools as plain objects, as they are
# chosen by a function here; a JSON Schema ``oneOf`` would call a message that
# also fits the open hosted-item shape invalid.
_OBJECTS: dict[str, Any] = {
    "type": "array",
    "items": {"type": "object", "additionalProperties": True},
}

Input = Annotated[
    Annotated[StrictStr, Tag("str")]
    | Annotated[list[InputItem], BeforeValidator(_item_count), Tag("list")],
    # Only the matching form reports errors: a bad item is not also "not a string".
    Discriminator(lambda value: "str" if isinstance(value, str) else "list"),
    WithJsonSchema({"anyOf": [{"type": "string"}, _OBJECTS]}),
]
Tools = Annotated[list[Tool], WithJsonSchema(_OBJECTS)]


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


# --- settings ---------------------------------------------------------------


class Reasoning(Strict):
    effort: Effort | None = None
    summary: Literal["auto", "concise", "detailed", "none"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    max_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_INT)

    @property
    def thinking(self) -> bool:
        return self.effort in THINKING_ON


class FormatText(Strict):
    type: Literal["text"]


class FormatJsonObject(Strict):
    type: Literal["json_object"]


class FormatJsonSchema(Strict):
    type: Literal["json_schema"]
    name: StrictStr = Field(min_length=1, max_length=64)
    schema_: dict[str, Any] = Field(alias="schema")
    description: StrictStr | None = None
    strict: StrictBool | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class TextConfig(Strict):
    format: (
        Annotated[FormatText | FormatJsonObject | FormatJsonSchema, Field(discriminator="type")]
        | None
    ) = None
    verbosity: Literal["low", "medium", "high"] | None = None


class StreamOptions(Strict):
    include_obfuscation: StrictBool | None = None
    include_usage: StrictBool | None = None


INCLUDE_ACCEPTED = frozenset(
    {
        "reasoning.encrypted_content",
        "message.input_image.image_url",
        "web_search_call.action.sources",
        "web_search_call.results",
        "file_search_call.results",
        "code_interpreter_call.outputs",
        "computer_call_output.output.image_url",
    }
)


class CreateResponse(Strict):
    model: StrictStr = Field(min_length=1, max_length=200)
    input: Input
    instructions: StrictStr | None = None
    stream: StrictBool | None = None
    max_output_tokens: StrictInt | None = Field(default=None, ge=1, le=MAX_INT)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    tools: Tools | None = None
    tool_choice: (
        Literal["auto", "none", "required"] | FunctionChoice | AllowedToolsChoice | HostedChoice
    ) | None = None
    parallel_tool_calls: StrictBool | None = None
    max_tool_calls: StrictInt | None = Field(default=None, ge=1, le=MAX_INT)
    text: TextConfig | None = None
    reasoning: Reasoning | None = None
    include: list[StrictStr] | None = None
    store: StrictBool | None = None
    previous_response_id: StrictStr | None = None
    metadata: dict[StrictStr, StrictStr] | None = None
    user: StrictStr | None = None
    safety_identifier: StrictStr | None = None
    prompt_cache_key: StrictStr | None = None
    prompt_cache_retention: Literal["in_memory", "24h", "in-memory"] | None = None
    service_tier: Literal["auto", "default", "flex", "priority", "scale"] | None = None
    stream_options: StreamOptions | None = None
    top_logprobs: StrictInt | None = Field(default=None, ge=0, le=20)
    truncation: Literal["auto", "disabled"] | None = None
    background: StrictBool | None = None
    client_metadata: dict[str, Any] | None = None
    # Refused with a 400 naming the parameter.
    conversation: Any = None
    prompt: Any = None
    context_management: Any = None

    @field_validator("temperature", "top_p", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | None):
            raise ValueError("must be a number")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            if len(value) > 16:
                raise ValueError("metadata holds at most 16 keys")
            for key, item in value.items():
                if len(key) > 64 or len(item) > 512:
                    raise ValueError("metadata keys are at most 64 and values 512 characters")
        return value

    @field_validator("include")
    @classmethod
    def _include(cls, value: list[str] | None) -> list[str] | None:
        for entry in value or ():
            if entry == "message.output_text.logprobs":
                raise ValueError("logprobs are not available from this server")
            if entry not in INCLUDE_ACCEPTED:
                raise ValueError(f"'{entry}' is not a supported include value")
        return value

    @model_validator(mode="after")
    def _refused(self) -> CreateResponse:
        refusals = {
            "background": self.background is True,
            "conversation": self.conversation is not None,
            "prompt": self.prompt is not None,
            "context_management": self.context_management is not None,
            "top_logprobs": bool(self.top_logprobs),
            "truncation": self.truncation == "auto",
        }
        for name, refused in refusals.items():
            if refused:
                raise RefusedParameter(name)
        if (
            isinstance(self.tool_choice, HostedChoice)
            and self.tool_choice.type in HOSTED_TOOL_TYPES
        ):
            raise RefusedParameter(
                "tool_choice",
                f"tool_choice names the hosted tool '{self.tool_choice.type}', "
                "which this server does not run.",
            )
        if isinstance(self.tool_choice, HostedChoice) and self.tool_choice.type == "allowed_tools":
            raise RefusedParameter(
                "tool_choice",
                "tool_choice of type 'allowed_tools' takes a 'mode' of 'auto' or 'required' "
                "and a list of 'tools'.",
            )
        if isinstance(self.tool_choice, HostedChoice) and not isinstance(
            self.tool_choice, FunctionChoice | AllowedToolsChoice
        ):
            raise RefusedParameter(
                "tool_choice", f"Unsupported tool_choice type '{self.tool_choice.type}'."
            )
        return self


REFUSAL_MESSAGES = {
    "background": "background mode is not supported: this server answers in the request.",
    "conversation": "conversation is not supported: send the conversation as input items.",
    "prompt": "Stored prompt templates ('prompt') are not supported.",
    "context_management": "context_management is not supported.",
    "top_logprobs": "top_logprobs is not supported: backends' log probabilities are not relayed.",
    "truncation": "truncation 'auto' is not supported; only 'disabled'.",
}


class RefusedParameter(ValueError):
    def __init__(self, param: str, message: str | None = None) -> None:
        self.param = param
        self.message = message or REFUSAL_MESSAGES.get(param, f"'{param}' is not supported.")
        super().__init__(self.message)
