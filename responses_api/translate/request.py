"""Responses request → Chat Completions request (SPEC §4.3–§4.5).

Sans-I/O: takes a :class:`CreateResponse`, already validated and typed at the
edge, and what is known about the model, and builds the chat request in two
steps. :func:`prepare_chat` translates messages and tools once per request
(:class:`ChatDraft`); :meth:`ChatDraft.for_route` adds what a backend route
decides (upstream model name, dialect, extra body) and returns the chat body
plus what the stream translator needs to map tool calls back
(:class:`ChatPlan`). A failover to another route costs only the second step.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from responses_api.backends.dialects import REASONING_FIELD, apply_reasoning, apply_tool_choice
from responses_api.errors import invalid
from responses_api.protocol import (
    AllowedToolsChoice,
    ContentPart,
    CreateResponse,
    CustomTool,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionChoice,
    FunctionTool,
    HostedItem,
    HostedTool,
    InputItem,
    ItemReference,
    MessageItem,
    NamespaceTool,
    ReasoningItem,
    Tool,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    ToolSearchTool,
)
from responses_api.translate.content import text_of, user_content

_CHAT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class ModelLimits:
    context_window: int | None = None
    max_output_tokens: int | None = None
    default_max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    supports_vision: bool = True


@dataclass(frozen=True, slots=True)
class ToolRef:
    """What a chat function name stands for on the Responses side."""

    kind: str  # "function", "custom" or "tool_search"
    name: str
    namespace: str | None = None


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

    def notice(self, code: str, message: str) -> None:
        _notice(self.notices, code, message)


def _notice(notices: list[dict[str, str]], code: str, message: str) -> None:
    if not any(n["code"] == code for n in notices):
        notices.append({"code": code, "message": message})


# The field a draft's assistant messages give prior reasoning back in; a route
# whose dialect names it otherwise gets copies of just those messages.
DRAFT_REASONING_FIELD = "reasoning_content"


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
            body["messages"] = _rename_reasoning(
                self.body["messages"], self.reasoning_at, reasoning_field
            )
        if self.has_tools:
            apply_tool_choice(body, dialect)
        plan = ChatPlan(
            body=body,
            tools=self.tools,
            notices=list(self.notices),
            max_output_tokens=self.max_output_tokens,
            max_tool_calls=self.max_tool_calls,
        )
        if apply_reasoning(body, dialect, effort=self.effort, budget=self.budget):
            plan.thinking_budget = self.budget
        return plan


def _rename_reasoning(
    messages: list[dict[str, Any]], at: Sequence[int], name: str
) -> list[dict[str, Any]]:
    out = list(messages)
    for index in at:
        out[index] = {
            (name if key == DRAFT_REASONING_FIELD else key): value
            for key, value in messages[index].items()
        }
    return out


def _chat_name(name: str, namespace: str | None, taken: dict[str, ToolRef]) -> str:
    candidate = f"{namespace}__{name}" if namespace else name
    if not _CHAT_NAME.match(candidate) or candidate in taken:
        digest = hashlib.sha1(candidate.encode()).hexdigest()[:8]
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", candidate)[:55]
        candidate = f"{safe}_{digest}"
    return candidate


def _custom_parameters(tool: CustomTool) -> dict[str, Any]:
    description = "The raw input for this tool, as free-form text."
    fmt = tool.format or {}
    if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        description += (
            f" It must follow this {fmt.get('syntax', 'grammar')} grammar:\n{fmt['definition']}"
        )
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": description}},
        "required": ["input"],
        "additionalProperties": False,
    }


class _Tools:
    """Builds the chat tool list and the reverse name map."""

    def __init__(self) -> None:
        self.refs: dict[str, ToolRef] = {}
        self.chat_tools: list[dict[str, Any]] = []
        self.by_client_name: dict[tuple[str | None, str], str] = {}
        self.dropped: list[str] = []

    def add(self, tool: Tool) -> None:
        if isinstance(tool, HostedTool) or (
            isinstance(tool, ToolSearchTool) and tool.execution != "client"
        ):
            self.dropped.append(tool.type)
        elif isinstance(tool, NamespaceTool):
            for inner in tool.tools:
                self._add_one(inner, namespace=tool.name)
        else:
            self._add_one(tool, namespace=None)

    def _add_one(
        self, tool: FunctionTool | CustomTool | ToolSearchTool, namespace: str | None
    ) -> None:
        if isinstance(tool, ToolSearchTool):
            name, kind = "tool_search", "tool_search"
            parameters = tool.parameters or {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for."}},
                "required": ["query"],
            }
            description = tool.description or "Search for more tools that can be loaded and used."
        elif isinstance(tool, CustomTool):
            name, kind = tool.name, "custom"
            parameters = _custom_parameters(tool)
            description = tool.description or ""
        else:
            name, kind = tool.name, "function"
            parameters = tool.parameters or {"type": "object", "properties": {}}
            description = tool.description or ""
        if (namespace, name) in self.by_client_name:
            return
        chat_name = _chat_name(name, namespace, self.refs)
        self.refs[chat_name] = ToolRef(kind=kind, name=name, namespace=namespace)
        self.by_client_name[(namespace, name)] = chat_name
        function: dict[str, Any] = {"name": chat_name, "parameters": parameters}
        if description:
            function["description"] = description
        if isinstance(tool, FunctionTool) and tool.strict is not None:
            function["strict"] = tool.strict
        self.chat_tools.append({"type": "function", "function": function})

    def chat_name_for(self, name: str, namespace: str | None) -> str:
        return self.by_client_name.get((namespace, name)) or (
            f"{namespace}__{name}" if namespace else name
        )


class _Messages:
    """Accumulates chat messages, merging assistant turns with their calls."""

    def __init__(self) -> None:
        self.system: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.pending_reasoning: list[str] = []

    def assistant(self) -> dict[str, Any]:
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant" or last.get("_closed"):
            last = {"role": "assistant", "content": None}
            self.messages.append(last)
        if self.pending_reasoning:
            previous = last.get(DRAFT_REASONING_FIELD) or ""
            last[DRAFT_REASONING_FIELD] = previous + "".join(self.pending_reasoning)
            self.pending_reasoning = []
        return last

    def add_user(self, content: str | list[dict[str, Any]]) -> None:
        self.messages.append({"role": "user", "content": content})

    def add_assistant(self, content: str | Sequence[ContentPart]) -> None:
        message = self.assistant()
        if message.get("tool_calls"):
            # Text after a call within one turn starts a new message.
            message["_closed"] = True
            message = self.assistant()
        message["content"] = (message["content"] or "") + text_of(content)

    def add_call(self, call: dict[str, Any]) -> None:
        self.assistant().setdefault("tool_calls", []).append(call)

    def add_tool_result(self, call_id: str, output: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})

    def result(self) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
        """The chat messages, and the indexes of those that carry reasoning."""
        out = []
        if self.system:
            out.append({"role": "system", "content": "\n\n".join(self.system)})
        reasoning_at = []
        for message in self.messages:
            message.pop("_closed", None)
            if (
                message["role"] == "assistant"
                and message.get("content") is None
                and not message.get("tool_calls")
            ):
                message["content"] = ""
            if DRAFT_REASONING_FIELD in message:
                reasoning_at.append(len(out))
            out.append(message)
        return out, tuple(reasoning_at)


def prepare_chat(request: CreateResponse, *, limits: ModelLimits) -> ChatDraft:
    """Translate the request's messages and tools, once whatever route serves
    it. Raises :class:`ApiError` for what the request asks that cannot be done."""
    tools = _Tools()
    for tool in request.tools or ():
        tools.add(tool)

    messages = _Messages()
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
            _add_item(item, index, messages, tools, limits, skipped)

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
    if tools.chat_tools:
        body["tools"] = tools.chat_tools
        choice = _tool_choice(request, tools)
        if choice is not None:
            body["tool_choice"] = choice
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    elif isinstance(request.tool_choice, FunctionChoice):
        raise invalid(
            f"tool_choice names '{request.tool_choice.name}', which is not among the tools.",
            param="tool_choice",
        )

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
    )


def build_chat_request(
    request: CreateResponse,
    *,
    upstream_model: str,
    dialect: str,
    limits: ModelLimits = ModelLimits(),
    extra_body: dict[str, Any] | None = None,
) -> ChatPlan:
    """Both steps at once, for a single route."""
    draft = prepare_chat(request, limits=limits)
    return draft.for_route(upstream_model=upstream_model, dialect=dialect, extra_body=extra_body)


def _tool_choice(request: CreateResponse, tools: _Tools) -> Any:
    choice = request.tool_choice
    if choice is None or isinstance(choice, str):
        return choice
    if isinstance(choice, FunctionChoice):
        chat_name = tools.by_client_name.get((None, choice.name))
        if chat_name is None:
            # A namespaced tool may be named by its inner name alone.
            matches = [n for (ns, name), n in tools.by_client_name.items() if name == choice.name]
            if len(matches) != 1:
                raise invalid(
                    f"tool_choice names '{choice.name}', which is not among the tools.",
                    param="tool_choice",
                )
            chat_name = matches[0]
        return {"type": "function", "function": {"name": chat_name}}
    if isinstance(choice, AllowedToolsChoice):
        return choice.mode
    return None


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


def _tool_summary(tool: Tool) -> dict[str, Any]:
    """What a loaded tool is, as the model is told it was found."""
    summary: dict[str, Any] = {"type": tool.type}
    for key in ("name", "description"):
        value = getattr(tool, key, None)
        if value is not None:
            summary[key] = value
    return summary


def _add_item(
    item: InputItem,
    index: int,
    messages: _Messages,
    tools: _Tools,
    limits: ModelLimits,
    skipped: list[str],
) -> None:
    if isinstance(item, MessageItem):
        if item.role in {"system", "developer"}:
            messages.system.append(text_of(item.content))
        elif item.role == "assistant":
            messages.add_assistant(item.content)
        else:
            param = f"input[{index}].content"
            messages.add_user(user_content(item.content, param, vision=limits.supports_vision))
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
    elif isinstance(item, FunctionCallOutputItem | CustomToolCallOutputItem):
        messages.add_tool_result(item.call_id, text_of(item.output))
    elif isinstance(item, ToolSearchOutputItem):
        summary = [_tool_summary(tool) for tool in item.tools]
        messages.add_tool_result(item.call_id or "", orjson.dumps(summary).decode())
    elif isinstance(item, ReasoningItem):
        parts = item.content or item.summary
        text = "".join(p.text for p in parts)
        if text:
            messages.pending_reasoning.append(text)
    elif isinstance(item, ItemReference):
        raise invalid(
            "item_reference needs a stored response; this organisation stores nothing.",
            param=f"input[{index}]",
        )
    elif isinstance(item, HostedItem):
        skipped.append(item.type)
