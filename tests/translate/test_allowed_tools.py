"""``tool_choice: {"type": "allowed_tools", ...}`` is checked and enforced."""

from __future__ import annotations

import pytest

from responses_api.translate.response import echo_settings
from tests.translate.test_request import plan_for, refusal

TOOLS = [
    {"type": "function", "name": "get_weather"},
    {"type": "function", "name": "get_time"},
    {"type": "custom", "name": "apply_patch"},
    {
        "type": "namespace",
        "name": "agents",
        "tools": [{"type": "function", "name": "spawn"}, {"type": "function", "name": "wait"}],
    },
    {"type": "tool_search", "execution": "client"},
    {"type": "web_search"},
]


def allowed(*entries, mode="auto", tools=TOOLS):
    choice = {"type": "allowed_tools", "mode": mode, "tools": list(entries)}
    return plan_for(tools=tools, tool_choice=choice)


def offered(plan) -> list[str]:
    return [t["function"]["name"] for t in plan.body.get("tools", ())]


def test_only_the_allowed_tools_reach_the_backend_with_the_mode_as_tool_choice():
    plan = allowed(
        {"type": "function", "name": "get_time"}, {"type": "custom", "name": "apply_patch"}
    )
    assert offered(plan) == ["get_time", "apply_patch"]
    assert plan.body["tool_choice"] == "auto"
    required = allowed({"type": "function", "name": "get_weather"}, mode="required")
    assert offered(required) == ["get_weather"] and required.body["tool_choice"] == "required"


def test_a_namespace_allows_all_its_tools_and_an_inner_tool_can_be_named_alone():
    assert offered(allowed({"type": "namespace", "name": "agents"})) == [
        "agents__spawn",
        "agents__wait",
    ]
    assert offered(allowed({"type": "function", "name": "wait"})) == ["agents__wait"]
    named = allowed({"type": "function", "name": "spawn", "namespace": "agents"})
    assert offered(named) == ["agents__spawn"]


def test_tool_search_and_hosted_tools_are_allowed_by_type():
    assert offered(allowed({"type": "tool_search"})) == ["tool_search"]
    # A hosted tool is dropped anyway: with nothing left, nothing is offered.
    plan = allowed({"type": "web_search"})
    assert "tools" not in plan.body and "tool_choice" not in plan.body
    assert [n["code"] for n in plan.notices] == ["hosted_tools_dropped"]


def test_calls_of_tools_not_allowed_now_still_map_back_in_the_history():
    items = [
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "c1", "name": "spawn", "namespace": "agents"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "get_time"}],
    }
    plan = plan_for(tools=TOOLS, tool_choice=choice, input=items)
    assert plan.body["messages"][1]["tool_calls"][0]["function"]["name"] == "agents__spawn"
    assert plan.tools["agents__spawn"].namespace == "agents"


@pytest.mark.parametrize(
    ("entries", "param"),
    [
        (
            [{"type": "function", "name": "get_time"}, {"type": "function", "name": "nope"}],
            "tool_choice.tools[1]",
        ),
        ([{"type": "custom", "name": "get_time"}], "tool_choice.tools[0]"),  # wrong type
        ([{"type": "function", "name": "apply_patch"}], "tool_choice.tools[0]"),
        ([{"type": "namespace", "name": "others"}], "tool_choice.tools[0]"),
        ([{"type": "function", "name": "spawn", "namespace": "x"}], "tool_choice.tools[0]"),
        ([{"type": "file_search"}], "tool_choice.tools[0]"),  # hosted, not among the tools
        ([{"type": "function"}], "tool_choice.tools[0]"),
        ([{"name": "get_time"}], "tool_choice.tools[0]"),
        ([{"type": "function", "name": "get_time"}, "get_time"], "tool_choice.tools[1]"),
        ([], "tool_choice.tools"),
    ],
)
def test_an_entry_that_names_no_tool_of_the_request_is_a_400_naming_it(entries, param):
    error = refusal(
        tools=TOOLS, tool_choice={"type": "allowed_tools", "mode": "auto", "tools": entries}
    )
    assert error.status == 400 and error.param == param, error.message


def test_required_over_hosted_tools_alone_cannot_be_honoured():
    error = refusal(
        tools=TOOLS,
        tool_choice={
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "web_search"}],
        },
    )
    assert error.status == 400 and error.param == "tool_choice"


def test_allowed_tools_without_any_tools_is_refused():
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"}]}
    assert refusal(tool_choice=choice).param == "tool_choice.tools[0]"


@pytest.mark.parametrize("mode", ["sometimes", 3])
def test_a_malformed_allowed_tools_choice_is_a_400(mode):
    error = refusal(tools=TOOLS, tool_choice={"type": "allowed_tools", "mode": mode, "tools": []})
    assert error.status == 400 and error.param == "tool_choice" and "allowed_tools" in error.message


def test_the_response_echoes_the_choice_as_sent():
    from responses_api.protocol.body import CreateResponse

    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "get_time"}, {"type": "web_search"}],
    }
    request = CreateResponse.model_validate(
        {"model": "m", "input": "hi", "tools": TOOLS, "tool_choice": choice}
    )
    echo = echo_settings(request, store=False, temperature=None, top_p=None, max_output_tokens=None)
    assert echo["tool_choice"] == choice
