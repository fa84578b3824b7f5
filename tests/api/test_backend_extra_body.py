"""A backend's ``extra_body``: set from the command line, sent in every chat request."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from responses_api.models import Backend
from responses_api.protocol.body import CreateResponse
from responses_api.translate.dialects import apply_tool_choice
from responses_api.translate.request import build_chat_request


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_add_backend_stores_extra_body():
    run("create_org", "acme", "--name", "Acme")
    extra = {"logit_bias": {"2": 100}, "stop": ["\n"]}
    args = ["add_backend", "--org", "acme", "--name", "llama", "--url", "http://127.0.0.1:9/v1"]
    run(*args, "--dialect", "llamacpp", "--extra-body", json.dumps(extra))
    assert Backend.objects.get().extra_body == extra
    run(*args)  # updating other settings keeps it
    assert Backend.objects.get().extra_body == extra


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["{not json", "[1, 2]"])
def test_add_backend_refuses_extra_body_that_is_not_a_json_object(value):
    run("create_org", "acme", "--name", "Acme")
    with pytest.raises(CommandError):
        run(
            "add_backend",
            "--org",
            "acme",
            "--name",
            "llama",
            "--url",
            "http://127.0.0.1:9/v1",
            "--extra-body",
            value,
        )


def test_extra_body_is_merged_and_request_fields_win():
    request = CreateResponse.model_validate(
        {"model": "m", "input": "hi", "temperature": 0.5, "reasoning": {"effort": "high"}}
    )
    extra = {"logit_bias": {"2": 100}, "temperature": 1.5, "chat_template_kwargs": {"x": 1}}
    plan = build_chat_request(request, upstream_model="up", dialect="llamacpp", extra_body=extra)
    assert plan.body["logit_bias"] == {"2": 100}
    assert plan.body["temperature"] == 0.5
    assert plan.body["chat_template_kwargs"] == {"x": 1, "enable_thinking": True, "thinking": True}
    # The backend's own dict (shared between requests) is left as it was.
    assert extra["chat_template_kwargs"] == {"x": 1}


@pytest.mark.parametrize(
    "effort,budget,expected",
    [
        (None, None, {"enable_thinking": False}),
        ("minimal", None, {"enable_thinking": False}),
        ("high", None, {"enable_thinking": True, "reasoning_effort": "high"}),
        (
            "xhigh",
            64,
            {"enable_thinking": True, "reasoning_effort": "high", "reasoning_budget_tokens": 64},
        ),
    ],
)
def test_llamacpp_reasoning_fields(effort, budget, expected):
    reasoning = {"effort": effort, "max_tokens": budget} if effort else None
    request = CreateResponse.model_validate(
        {"model": "m", "input": "hi", **({"reasoning": reasoning} if reasoning else {})}
    )
    plan = build_chat_request(request, upstream_model="up", dialect="llamacpp")
    body = plan.body
    assert body["reasoning_format"] == "deepseek"
    assert body["chat_template_kwargs"]["enable_thinking"] is expected["enable_thinking"]
    assert body.get("reasoning_effort") == expected.get("reasoning_effort")
    assert body.get("reasoning_budget_tokens") == expected.get("reasoning_budget_tokens")
    assert plan.thinking_budget == expected.get("reasoning_budget_tokens")
    assert "thinking_budget_tokens" not in body


def test_a_named_tool_choice_becomes_required_over_that_tool_for_llamacpp():
    tools = [
        {"type": "function", "function": {"name": "a"}},
        {"type": "function", "function": {"name": "b"}},
    ]
    body = {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "b"}}}
    apply_tool_choice(body, "llamacpp")
    assert body == {"tools": [tools[1]], "tool_choice": "required"}
    for dialect in ("vllm", "sglang", "ollama", "openai"):
        other = {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "b"}}}
        apply_tool_choice(other, dialect)
        assert other["tool_choice"] == {"type": "function", "function": {"name": "b"}}
    auto = {"tools": tools, "tool_choice": "auto"}
    apply_tool_choice(auto, "llamacpp")
    assert auto == {"tools": tools, "tool_choice": "auto"}
