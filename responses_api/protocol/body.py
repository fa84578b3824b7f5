"""The request body of ``POST /v1/responses``, validated once at the edge.

docs/api/responses.md says what each field does.
Unknown top-level fields are refused; the input items and the tools, which
are lenient, have modules of their own (``protocol.items``,
``protocol.tools``). Parameters this server does not serve are refused with
a 400 naming them. This module imports neither Django nor httpx.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from responses_api.protocol.items import Input
from responses_api.protocol.refusals import Strict
from responses_api.protocol.tools import (
    HOSTED_TOOL_TYPES,
    AllowedToolsChoice,
    FunctionChoice,
    HostedChoice,
    Tools,
)

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
THINKING_ON = frozenset({"low", "medium", "high", "xhigh"})

# The largest integer a backend's token and count fields take (int32).
MAX_INT = 2**31 - 1


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


class ContextManagement(Strict):
    """Compact the conversation first when its input passes ``compact_threshold``
    tokens (docs/api/compaction.md)."""

    type: Literal["compaction"]
    compact_threshold: StrictInt | None = Field(default=None, ge=1, le=MAX_INT)


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


class ConversationRef(BaseModel):
    """``conversation`` as an object: ``{"id": "conv_…"}``."""

    model_config = ConfigDict(extra="forbid")

    id: StrictStr = Field(min_length=1, max_length=64)


def metadata_checked(value: dict[str, str] | None) -> dict[str, str] | None:
    """OpenAI's bounds on ``metadata``, wherever a body carries it."""
    if value is not None:
        if len(value) > 16:
            raise ValueError("metadata holds at most 16 keys")
        for key, item in value.items():
            if len(key) > 64 or len(item) > 512:
                raise ValueError("metadata keys are at most 64 and values 512 characters")
    return value


# The sampling ranges of Chat Completions; a model's recommended values
# (the catalogue) are held to the same ones.
TEMPERATURE_MAX = 2
TOP_P_MAX = 1


class CreateResponse(BaseModel):
    # Strict, as every setting is: an unknown top-level field is refused.
    model_config = ConfigDict(extra="forbid")

    model: StrictStr = Field(min_length=1, max_length=200)
    input: Input
    instructions: StrictStr | None = None
    stream: StrictBool | None = None
    max_output_tokens: StrictInt | None = Field(default=None, ge=1, le=MAX_INT)
    temperature: float | None = Field(default=None, ge=0, le=TEMPERATURE_MAX)
    top_p: float | None = Field(default=None, gt=0, le=TOP_P_MAX)
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
    context_management: list[ContextManagement] | None = Field(default=None, max_length=1)
    conversation: StrictStr | ConversationRef | None = None
    # Refused with a 400 naming the parameter.
    prompt: Any = None

    def conversation_id(self) -> str | None:
        conversation = self.conversation
        return conversation.id if isinstance(conversation, ConversationRef) else conversation

    @field_validator("temperature", "top_p", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | None):
            raise ValueError("must be a number")
        return value

    @field_validator("conversation")
    @classmethod
    def _conversation(cls, value: str | ConversationRef | None) -> str | ConversationRef | None:
        if isinstance(value, str) and not 1 <= len(value) <= 64:
            raise ValueError("a conversation id has 1 to 64 characters")
        return value

    _metadata = field_validator("metadata")(metadata_checked)

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
            "prompt": self.prompt is not None,
            "top_logprobs": bool(self.top_logprobs),
            "truncation": self.truncation == "auto",
        }
        for name, refused in refusals.items():
            if refused:
                raise RefusedParameter(name)
        if (
            isinstance(self.tool_choice, HostedChoice)
            and self.tool_choice.type in HOSTED_TOOL_TYPES - CHOSEN_WHEN_RUN
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
        if (
            isinstance(self.tool_choice, HostedChoice)
            and not isinstance(self.tool_choice, FunctionChoice | AllowedToolsChoice)
            and self.tool_choice.type not in CHOSEN_WHEN_RUN
        ):
            raise RefusedParameter(
                "tool_choice", f"Unsupported tool_choice type '{self.tool_choice.type}'."
            )
        return self


# Hosted tools a tool_choice may name: refused later, at translation, where
# the organisation does not run them (``translate.tools.ChatTools.choice``).
CHOSEN_WHEN_RUN = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "web_search_2025_08_26",
        "file_search",
    }
)

REFUSAL_MESSAGES = {
    "prompt": "Stored prompt templates ('prompt') are not supported.",
    "top_logprobs": "top_logprobs is not supported: backends' log probabilities are not relayed.",
    "truncation": "truncation 'auto' is not supported; only 'disabled'.",
}


class RefusedParameter(ValueError):
    def __init__(self, param: str, message: str | None = None) -> None:
        self.param = param
        self.message = message or REFUSAL_MESSAGES.get(param, f"'{param}' is not supported.")
        super().__init__(self.message)
