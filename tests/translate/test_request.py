"""Responses request → chat body, pure functions only."""

from __future__ import annotations

import base64

import orjson
import pytest

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError
from responses_api.translate.request import ModelLimits, build_chat_request


def plan_for(dialect: str = "openai", limits: ModelLimits | None = None, **fields):
    body = {"model": "m", "input": "hi", **fields}
    return build_chat_request(
        CreateResponse.model_validate(body),
        upstream_model="up",
        dialect=dialect,
        limits=limits or ModelLimits(),
    )


def refusal(**fields) -> ApiError:
    from pydantic import ValidationError

    from responses_api.protocol.errors import from_validation_error

    try:
        plan_for(**fields)
    except ValidationError as exc:
        return from_validation_error(exc)
    except ApiError as exc:
        return exc
    raise AssertionError(f"{fields} was accepted")


def test_string_input_becomes_one_user_message_after_instructions():
    body = plan_for(instructions="Be brief.").body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert body["model"] == "up" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_system_and_developer_messages_join_the_system_message_in_order():
    body = plan_for(
        instructions="first",
        input=[
            {"role": "developer", "content": "second"},
            {"role": "user", "content": "question"},
            {
                "type": "message",
                "role": "system",
                "content": [{"type": "input_text", "text": "third"}],
            },
        ],
    ).body
    assert body["messages"][0] == {"role": "system", "content": "first\n\nsecond\n\nthird"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_every_text_part_kind_is_read():
    body = plan_for(
        input=[
            {"role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "b", "annotations": []},
                    {"type": "refusal", "refusal": "c"},
                ],
            },
            {"role": "user", "content": "d"},
        ]
    ).body
    assert [m["content"] for m in body["messages"]] == ["a", "bc", "d"]


def test_inline_image_becomes_an_image_url_part():
    url = "data:image/png;base64,iVBORw0KGgo="
    body = plan_for(
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is it"},
                    {"type": "input_image", "image_url": url, "detail": "low"},
                ],
            }
        ]
    ).body
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "what is it"},
        {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
    ]


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
        {"type": "input_image", "file_id": "file_123"},
    ],
)
def test_images_by_url_or_file_id_are_refused(part):
    error = refusal(input=[{"role": "user", "content": [part]}])
    assert error.status == 400 and error.param == "input[0].content[0]"


def test_a_text_file_is_given_to_the_model_with_its_name():
    data = base64.b64encode(b"a,b\n1,2\n").decode()
    body = plan_for(
        input=[
            {
                "role": "user",
                "content": [{"type": "input_file", "filename": "t.csv", "file_data": data}],
            }
        ]
    ).body
    assert body["messages"][0]["content"] == '<file name="t.csv">\na,b\n1,2\n\n</file>'


def test_other_files_and_large_files_are_refused():
    pdf = refusal(
        input=[
            {
                "role": "user",
                "content": [{"type": "input_file", "filename": "a.pdf", "file_data": "AAAA"}],
            }
        ]
    )
    assert pdf.status == 400 and pdf.param == "input[0].content[0]"
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    large = refusal(
        input=[
            {
                "role": "user",
                "content": [{"type": "input_file", "filename": "a.txt", "file_data": big}],
            }
        ]
    )
    assert large.status == 413


def test_function_calls_and_outputs_pair_by_call_id():
    body = plan_for(
        tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        input=[
            {"role": "user", "content": "weather?"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": "{}",
                "id": "fc_x",
                "status": "completed",
            },
            {
                "type": "function_call",
                "call_id": "c2",
                "name": "get_weather",
                "arguments": '{"a":1}',
            },
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": "sunny",
                "id": "fco_made_up",
            },
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "rain"}],
            },
        ],
    ).body
    assistant, tool1, tool2 = body["messages"][1:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert assistant["tool_calls"][1]["function"] == {"name": "get_weather", "arguments": '{"a":1}'}
    assert tool1 == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert tool2["content"] == "rain"


def test_custom_tool_is_a_function_with_one_string_argument_and_maps_back():
    plan = plan_for(
        tools=[
            {
                "type": "custom",
                "name": "apply_patch",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
            }
        ],
        input=[
            {"role": "user", "content": "edit"},
            {
                "type": "custom_tool_call",
                "call_id": "c1",
                "name": "apply_patch",
                "input": "*** Begin Patch",
            },
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
        ],
    )
    function = plan.body["tools"][0]["function"]
    assert function["name"] == "apply_patch"
    assert function["parameters"]["required"] == ["input"]
    assert "lark" in function["parameters"]["properties"]["input"]["description"]
    call = plan.body["messages"][1]["tool_calls"][0]
    assert orjson.loads(call["function"]["arguments"]) == {"input": "*** Begin Patch"}
    assert plan.tools["apply_patch"].kind == "custom"


def test_namespace_tools_are_flattened_with_reversible_names():
    plan = plan_for(
        tools=[
            {
                "type": "namespace",
                "name": "multi_agent_v1",
                "description": "agents",
                "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object"}}],
            }
        ],
        input=[
            {"role": "user", "content": "go"},
            {
                "type": "function_call",
                "call_id": "c",
                "name": "spawn",
                "namespace": "multi_agent_v1",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c", "output": "done"},
        ],
    )
    chat_name = plan.body["tools"][0]["function"]["name"]
    ref = plan.tools[chat_name]
    assert (ref.kind, ref.name, ref.namespace) == ("function", "spawn", "multi_agent_v1")
    assert plan.body["messages"][1]["tool_calls"][0]["function"]["name"] == chat_name


def test_client_tool_search_is_offered_and_its_items_map_to_a_call_and_result():
    plan = plan_for(
        tools=[{"type": "tool_search", "execution": "client"}],
        input=[
            {"role": "user", "content": "find tools"},
            {
                "type": "tool_search_call",
                "call_id": "ts1",
                "arguments": {"query": "calendar"},
                "execution": "client",
            },
            {
                "type": "tool_search_output",
                "call_id": "ts1",
                "tools": [
                    {
                        "type": "function",
                        "name": "cal_add",
                        "description": "Add",
                        "parameters": {"type": "object"},
                    }
                ],
            },
        ],
    )
    names = [t["function"]["name"] for t in plan.body["tools"]]
    assert names == ["tool_search", "cal_add"]  # loaded tools become callable
    assert plan.tools["tool_search"].kind == "tool_search"
    call = plan.body["messages"][1]["tool_calls"][0]
    assert call["id"] == "ts1" and orjson.loads(call["function"]["arguments"]) == {
        "query": "calendar"
    }
    assert plan.body["messages"][2]["role"] == "tool"


def test_hosted_tools_are_dropped_with_a_notice_and_hosted_items_skipped():
    plan = plan_for(
        tools=[{"type": "web_search"}, {"type": "function", "name": "f"}],
        input=[
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {}},
            {"role": "user", "content": "hi"},
        ],
    )
    assert [t["function"]["name"] for t in plan.body["tools"]] == ["f"]
    assert [n["code"] for n in plan.notices] == ["hosted_tools_dropped", "hosted_items_skipped"]


def test_reasoning_items_go_back_as_the_dialects_reasoning_field():
    items = [
        {"role": "user", "content": "q"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "thought"}],
            "encrypted_content": None,
        },
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "more"},
    ]
    vllm = plan_for("vllm", input=items).body["messages"][1]
    assert vllm == {"role": "assistant", "content": "answer", "reasoning_content": "thought"}
    ollama = plan_for("ollama", input=items).body["messages"][1]
    assert ollama["reasoning"] == "thought"


def test_unknown_item_types_are_refused_naming_the_type():
    error = refusal(input=[{"type": "bogus_item"}])
    assert error.status == 400 and error.param == "input[0].type" and "bogus_item" in error.message


def test_tool_choice_forms():
    tools = [{"type": "function", "name": "f"}]
    assert plan_for(tools=tools, tool_choice="required").body["tool_choice"] == "required"
    named = plan_for(tools=tools, tool_choice={"type": "function", "name": "f"}).body
    assert named["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert (
        refusal(tools=tools, tool_choice={"type": "function", "name": "g"}).param == "tool_choice"
    )
    assert refusal(tools=tools, tool_choice={"type": "web_search"}).param == "tool_choice"
    assert plan_for(tools=tools, parallel_tool_calls=False).body["parallel_tool_calls"] is False
    assert plan_for(tools=tools, max_tool_calls=2).max_tool_calls == 2


def test_text_format_becomes_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = plan_for(
        text={
            "format": {"type": "json_schema", "name": "x", "schema": schema, "strict": True},
            "verbosity": "low",
        }
    ).body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": schema, "strict": True},
    }
    assert plan_for(text={"format": {"type": "json_object"}}).body["response_format"] == {
        "type": "json_object"
    }
    assert "response_format" not in plan_for(text={"format": {"type": "text"}}).body


def test_max_output_tokens_is_capped_with_a_notice_and_defaults_from_the_model():
    limits = ModelLimits(
        max_output_tokens=100, default_max_output_tokens=50, temperature=0.6, top_p=0.95
    )
    capped = plan_for(limits=limits, max_output_tokens=500)
    assert capped.body["max_tokens"] == 100
    assert [n["code"] for n in capped.notices] == ["max_output_tokens_capped"]
    default = plan_for(limits=limits)
    assert default.body["max_tokens"] == 50 and not default.notices
    assert (default.body["temperature"], default.body["top_p"]) == (0.6, 0.95)
    explicit = plan_for(limits=limits, temperature=0.0, top_p=0.5).body
    assert (explicit["temperature"], explicit["top_p"]) == (0.0, 0.5)


def test_context_window_caps_the_output():
    plan = plan_for(
        limits=ModelLimits(context_window=1000), input="x" * 2000, max_output_tokens=900
    )
    assert plan.body["max_tokens"] < 900


@pytest.mark.parametrize(
    ("dialect", "effort", "expected"),
    [
        (
            "vllm",
            "high",
            {
                "chat_template_kwargs": {"enable_thinking": True, "thinking": True},
                "reasoning_effort": "high",
            },
        ),
        ("vllm", None, {"chat_template_kwargs": {"enable_thinking": False, "thinking": False}}),
        (
            "sglang",
            "minimal",
            {
                "chat_template_kwargs": {"enable_thinking": False, "thinking": False},
                "separate_reasoning": True,
            },
        ),
        (
            "llamacpp",
            "low",
            {
                "chat_template_kwargs": {"enable_thinking": True, "thinking": True},
                "reasoning_effort": "low",
            },
        ),
        ("ollama", "medium", {"think": True, "reasoning_effort": "medium"}),
        ("ollama", "none", {"think": False, "reasoning_effort": "none"}),
        ("openai", "xhigh", {"reasoning_effort": "high"}),
        ("openai", None, {}),
    ],
)
def test_reasoning_effort_per_dialect(dialect, effort, expected):
    reasoning = {"effort": effort} if effort else None
    body = plan_for(dialect, reasoning=reasoning).body
    keys = ("chat_template_kwargs", "reasoning_effort", "separate_reasoning", "think")
    assert {k: body[k] for k in keys if k in body} == expected


@pytest.mark.parametrize(
    ("dialect", "field"),
    [
        ("vllm", "thinking_token_budget"),
        ("sglang", "thinking_budget"),
        ("llamacpp", "reasoning_budget_tokens"),
    ],
)
def test_thinking_budget_per_dialect(dialect, field):
    plan = plan_for(dialect, reasoning={"effort": "high", "max_tokens": 64})
    assert plan.body[field] == 64 and plan.thinking_budget == 64


def test_client_metadata_and_accepted_fields_never_reach_the_backend():
    plan = plan_for(
        client_metadata={"secret": "x"},
        metadata={"k": "v"},
        user="u",
        safety_identifier="s",
        prompt_cache_key="p",
        prompt_cache_retention="24h",
        service_tier="auto",
        stream_options={"include_obfuscation": False},
        top_logprobs=0,
        truncation="disabled",
        background=False,
        include=["reasoning.encrypted_content"],
        store=False,
        text={"verbosity": "high"},
        reasoning={"summary": "auto"},
    )
    raw = orjson.dumps(plan.body).decode()
    for word in ("secret", "client_metadata", "metadata", "safety", "prompt_cache", "service_tier"):
        assert word not in raw


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"messages": []}, "messages"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_output_tokens": -3}, "max_output_tokens"),
        ({"max_output_tokens": 1.5}, "max_output_tokens"),
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.1}, "top_p"),
        ({"max_tool_calls": 0}, "max_tool_calls"),
        ({"reasoning": {"max_tokens": -1}}, "reasoning.max_tokens"),
        ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({"background": "yes"}, "background"),
        ({"conversation": 5}, "conversation"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"context_management": [{"type": "truncate"}]}, "context_management[0].type"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"truncation": "auto"}, "truncation"),
        ({"include": ["message.output_text.logprobs"]}, "include"),
        ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
        ({"input": 5}, "input"),
        ({"tools": ["x"]}, "tools[0]"),
    ],
)
def test_refusals_name_the_parameter(fields, param):
    error = refusal(**fields)
    assert error.status == 400 and error.param == param, error.message
    if param == "messages":
        assert error.message == "Unknown parameter: 'messages'."
