"""Responses request → Chat Completions request (docs/api/responses.md).

Sans-I/O: takes a :class:`CreateResponse`, already validated and typed at the
edge, and what is known about the model, and builds the chat request in two
steps. :func:`prepare_chat` translates messages and tools once per request
(:class:`ChatDraft`); :meth:`ChatDraft.for_route` adds what a backend route
decides (upstream model name, dialect, extra body) and returns the chat body
plus what the stream translator needs to map tool calls back
(:class:`ChatPlan`). A failover to another route costs only the second step.
The items become chat messages here, one kind at a time; the message list
they build is ``translate.messages``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import invalid
from responses_api.protocol.items import (
    ToolSearchOutputItem,
)
from responses_api.protocol.tools import (
    AllowedToolsChoice,
    FunctionChoice,
    HostedChoice,
    HostedTool,
)
from responses_api.translate.dialects import (
    REASONING_FIELD,
    apply_cache_salt,
    apply_reasoning,
    apply_tool_choice,
)
from responses_api.translate.history import add_item
from responses_api.translate.messages import DRAFT_REASONING_FIELD, ChatMessages, rename_reasoning
from responses_api.translate.sealing import ReasoningSeal
from responses_api.translate.tools import (
    ChatTools,
    HostedFunction,
    ToolRef,
    hosted_not_run,
    not_among_tools,
)

__all__ = [
    "ChatDraft",
    "ChatPlan",
    "HostedTools",
    "ModelLimits",
    "build_chat_request",
    "prepare_chat",
]

ENCRYPTED_REASONING = "reasoning.encrypted_content"


@dataclass(frozen=True, slots=True)
class ModelLimits:
    context_window: int | None = None
    max_output_tokens: int | None = None
    default_max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    supports_vision: bool = True


@dataclass(frozen=True, slots=True)
class HostedTools:
    """The hosted tools the gateway runs for a request (``pipeline.hosted``):
    the request's tool types they stand for, the functions offered in their
    place, and what the model reads of the calls run so far in this
    response where their items do not hold it (by item id)."""

    runs: frozenset[str]
    functions: Sequence[HostedFunction] = ()
    results: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ChatPlan:
    """The chat request for one route. Its body shares nested values (messages,
    tools) with the :class:`ChatDraft` it came from: they are read, never
    changed."""

    body: dict[str, Any]
    tools: dict[str, ToolRef] = field(default_factory=dict)
    notices: list[dict[str, str]] = field(default_factory=list)
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    thinking_budget: int | None = None
    # Seals the answer's reasoning items, when the request includes
    # ``reasoning.encrypted_content``.
    seal: ReasoningSeal | None = None

    def notice(self, code: str, message: str) -> None:
        _notice(self.notices, code, message)


def _notice(notices: list[dict[str, str]], code: str, message: str) -> None:
    if not any(n["code"] == code for n in notices):
        notices.append({"code": code, "message": message})


@dataclass(frozen=True, slots=True)
class ChatDraft:
    """A request translated for whichever route serves it (:func:`prepare_chat`)."""

    # The chat body fields the request decides: messages, tools, sampling, format.
    body: dict[str, Any]
    tools: dict[str, ToolRef]
    notices: tuple[dict[str, str], ...]
    max_output_tokens: int | None
    max_tool_calls: int | None
    effort: str | None
    budget: int | None
    has_tools: bool
    # Indexes of the messages that carry DRAFT_REASONING_FIELD.
    reasoning_at: tuple[int, ...]
    seal: ReasoningSeal | None = None
    # The organisation's prefix-cache salt (``dialects.apply_cache_salt``).
    cache_salt: str | None = None

    def for_route(
        self, *, upstream_model: str, dialect: str, extra_body: dict[str, Any] | None
    ) -> ChatPlan:
        """The chat request for one route: no message or tool is translated again."""
        reasoning_field = REASONING_FIELD[dialect]
        body: dict[str, Any] = {}
        if extra_body:
            body.update(extra_body)  # the request's own fields win
        body["model"] = upstream_model
        body.update(self.body)
        if self.reasoning_at and reasoning_field != DRAFT_REASONING_FIELD:
            body["messages"] = rename_reasoning(
                self.body["messages"], self.reasoning_at, reasoning_field
            )
        if self.has_tools:
            apply_tool_choice(body, dialect)
        apply_cache_salt(body, dialect, self.cache_salt)
        plan = ChatPlan(
            body=body,
            tools=self.tools,
            notices=list(self.notices),
            max_output_tokens=self.max_output_tokens,
            max_tool_calls=self.max_tool_calls,
            seal=self.seal,
        )
        if apply_reasoning(body, dialect, effort=self.effort, budget=self.budget):
            plan.thinking_budget = self.budget
        return plan


def prepare_chat(
    request: CreateResponse,
    *,
    limits: ModelLimits,
    seal: ReasoningSeal | None = None,
    cache_salt: str | None = None,
    hosted: HostedTools | None = None,
) -> ChatDraft:
    """Translate the request's messages and tools, once whatever route serves
    it. Raises :class:`ApiError` for what the request asks that cannot be done.

    ``seal`` is the caller's organisation's: it opens the reasoning items the
    client carries back sealed, and seals the answer's when the request
    includes ``reasoning.encrypted_content``. Without it, sealed reasoning
    is refused. ``cache_salt`` is the organisation's, for the backends that
    partition their prefix cache by it. ``hosted``, when the gateway runs
    some of the request's hosted tools: the functions offered in their place
    (the others are dropped, with a notice)."""
    tools = ChatTools()
    runs = hosted.runs if hosted is not None else frozenset()
    for tool in request.tools or ():
        if not (isinstance(tool, HostedTool) and tool.type in runs):
            tools.add(tool)
    for function in hosted.functions if hosted is not None else ():
        tools.add_hosted(function)
    if hosted is not None:
        tools.results = hosted.results

    messages = ChatMessages()
    if request.instructions:
        messages.system.append(request.instructions)

    skipped: list[str] = []
    if isinstance(request.input, str):
        messages.add_user(request.input)
    else:
        # Tools a client loaded through tool_search become callable.
        for item in request.input:
            if isinstance(item, ToolSearchOutputItem):
                for loaded in item.tools:
                    tools.add(loaded)
        for index, item in enumerate(request.input):
            add_item(item, index, messages, tools, limits.supports_vision, skipped, seal)

    notices: list[dict[str, str]] = []
    if tools.dropped:
        names = ", ".join(sorted(set(tools.dropped)))
        _notice(
            notices,
            "hosted_tools_dropped",
            f"Hosted tools are not available on this server and were dropped: {names}.",
        )
    if skipped:
        names = ", ".join(sorted(set(skipped)))
        _notice(
            notices,
            "hosted_items_skipped",
            f"Input items of hosted tools were skipped: {names}.",
        )

    chat_messages, reasoning_at = messages.result()
    if not chat_messages:
        raise invalid("input must hold at least one message.", param="input")
    body: dict[str, Any] = {
        "messages": chat_messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if isinstance(request.tool_choice, AllowedToolsChoice):
        tools.allow_only(request.tool_choice)
    if tools.chat_tools:
        body["tools"] = tools.chat_tools
        choice = tools.choice(request.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    elif isinstance(request.tool_choice, FunctionChoice):
        raise not_among_tools(request.tool_choice.name)
    elif isinstance(request.tool_choice, HostedChoice):
        raise hosted_not_run(request.tool_choice.type)

    max_output_tokens = _max_tokens(request, limits, notices, chat_messages)
    if max_output_tokens is not None:
        body["max_tokens"] = max_output_tokens

    temperature = request.temperature if request.temperature is not None else limits.temperature
    if temperature is not None:
        body["temperature"] = temperature
    top_p = request.top_p if request.top_p is not None else limits.top_p
    if top_p is not None:
        body["top_p"] = top_p

    fmt = request.text.format if request.text else None
    if fmt is not None and fmt.type == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif fmt is not None and fmt.type == "json_schema":
        schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema_}
        if fmt.strict is not None:
            schema["strict"] = fmt.strict
        if fmt.description:
            schema["description"] = fmt.description
        body["response_format"] = {"type": "json_schema", "json_schema": schema}

    reasoning = request.reasoning
    return ChatDraft(
        body=body,
        tools=tools.refs,
        notices=tuple(notices),
        max_output_tokens=max_output_tokens,
        max_tool_calls=request.max_tool_calls,
        effort=reasoning.effort if reasoning else None,
        budget=reasoning.max_tokens if reasoning else None,
        has_tools=bool(tools.chat_tools),
        reasoning_at=reasoning_at,
        seal=seal if request.include and ENCRYPTED_REASONING in request.include else None,
        cache_salt=cache_salt,
    )


def build_chat_request(
    request: CreateResponse,
    *,
    upstream_model: str,
    dialect: str,
    limits: ModelLimits = ModelLimits(),
    extra_body: dict[str, Any] | None = None,
    seal: ReasoningSeal | None = None,
    cache_salt: str | None = None,
) -> ChatPlan:
    """Both steps at once, for a single route."""
    draft = prepare_chat(request, limits=limits, seal=seal, cache_salt=cache_salt)
    return draft.for_route(upstream_model=upstream_model, dialect=dialect, extra_body=extra_body)


def _max_tokens(
    request: CreateResponse,
    limits: ModelLimits,
    notices: list[dict[str, str]],
    messages: list[dict[str, Any]],
) -> int | None:
    wanted = request.max_output_tokens or limits.default_max_output_tokens
    cap = limits.max_output_tokens
    if limits.context_window:
        # A cheap over-estimate would refuse good requests; chars/4 is the
        # usual average for BPE vocabularies and errs on the generous side.
        estimate = len(orjson.dumps(messages)) // 4
        left = limits.context_window - estimate
        if left >= 1:
            cap = min(cap, left) if cap else left
    if wanted is None:
        return cap
    if cap is not None and wanted > cap:
        if request.max_output_tokens is not None:
            _notice(
                notices,
                "max_output_tokens_capped",
                f"max_output_tokens was lowered from {wanted} to {cap}, "
                "the most this model can produce for this input.",
            )
        return cap
    return wanted
