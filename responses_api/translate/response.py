"""The Responses ``response`` object (docs/api/responses.md).

Every field of OpenAI's ``Response`` and the Open Responses
``ResponseResource`` is present with an honest value; settings are echoed as
they were applied.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.tools import FunctionTool, NamespaceTool


def echo_settings(
    request: CreateResponse,
    *,
    store: bool,
    temperature: float | None,
    top_p: float | None,
    max_output_tokens: int | None,
) -> dict[str, Any]:
    """The request's settings as the response repeats them, computed once."""
    tools = []
    for tool in request.tools or ():
        echoed = _as_sent(tool)
        if isinstance(tool, NamespaceTool):
            echoed["tools"] = [_as_sent(inner) for inner in tool.tools]
        elif isinstance(tool, FunctionTool) and "strict" not in echoed:
            echoed = {"strict": True, **echoed}
        tools.append(echoed)
    choice: Any = request.tool_choice
    if choice is None:
        choice = "auto"
    elif not isinstance(choice, str):
        choice = choice.model_dump(exclude_none=True)
    text: dict[str, Any] = {"format": {"type": "text"}, "verbosity": "medium"}
    if request.text is not None:
        if request.text.format is not None:
            text["format"] = request.text.format.model_dump(by_alias=True, exclude_none=True)
        if request.text.verbosity:
            text["verbosity"] = request.text.verbosity
    reasoning: dict[str, str | None] = {"effort": None, "summary": None}
    if request.reasoning is not None:
        reasoning = {"effort": request.reasoning.effort, "summary": request.reasoning.summary}
    return {
        "instructions": request.instructions,
        "tools": tools,
        "tool_choice": choice,
        "temperature": 1.0 if temperature is None else temperature,
        "top_p": 1.0 if top_p is None else top_p,
        "max_output_tokens": max_output_tokens,
        "max_tool_calls": request.max_tool_calls,
        "text": text,
        "reasoning": reasoning,
        "parallel_tool_calls": True
        if request.parallel_tool_calls is None
        else request.parallel_tool_calls,
        "metadata": request.metadata or {},
        "store": store,
        "background": False,
        "truncation": "disabled",
        "top_logprobs": 0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "service_tier": "default",
        "user": request.user,
        "safety_identifier": request.safety_identifier,
        "prompt_cache_key": request.prompt_cache_key,
        "prompt_cache_retention": None,
        "previous_response_id": request.previous_response_id,
    }


def _as_sent(model: BaseModel) -> dict[str, Any]:
    """The fields the client set (a hosted tool's own fields too), sharing
    their values: a fraction of the cost of ``model_dump``."""
    # A model's __dict__ holds its fields' values, in declaration order.
    values = model.__dict__
    sent = model.__pydantic_fields_set__
    # Loose models ignore unknown fields, so what was set is a subset of the
    # fields (a hosted tool's required ``type`` plus its own fields otherwise).
    if len(sent) == len(values):
        out = dict(values)
    else:
        out = {name: value for name, value in values.items() if name in sent}
    if model.__pydantic_extra__:
        out.update(model.__pydantic_extra__)
    return out


def message_item(
    item_id: str, text: str, status: str, annotations: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []}
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [part],
    }


def envelope(
    *,
    response_id: str,
    created_at: int,
    model: str,
    echo: dict[str, Any],
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
    completed_at: int | None = None,
    extras: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "completed_at": completed_at,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "model": model,
        "output": output,
        "usage": usage,
        **echo,
    }
    if extras is not None:
        body["switchyard"] = extras
    return body
