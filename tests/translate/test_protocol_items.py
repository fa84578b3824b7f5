"""Input items and tools are typed once, at the edge."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError, from_validation_error
from responses_api.protocol.items import (
    MAX_INPUT_ITEMS,
    CustomToolCallItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    HostedItem,
    MessageItem,
    ReasoningItem,
    ToolSearchOutputItem,
    WebSearchCallItem,
)
from responses_api.protocol.tools import (
    CustomTool,
    FunctionTool,
    HostedTool,
    NamespaceTool,
    ToolSearchTool,
)

CODEX = Path(__file__).resolve().parents[1] / "fixtures" / "codex"


def parse(**fields) -> CreateResponse:
    return CreateResponse.model_validate({"model": "m", "input": "hi", **fields})


def refusal(**fields) -> ApiError:
    try:
        parse(**fields)
    except ValidationError as exc:
        return from_validation_error(exc)
    raise AssertionError(f"{fields} was accepted")


def test_a_message_without_type_is_a_message():
    request = parse(input=[{"role": "user", "content": "hi"}])
    assert request.input == [MessageItem(role="user", content="hi")]


def test_each_item_type_is_its_own_model():
    request = parse(
        input=[
            {"type": "message", "role": "developer", "content": "rules"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "x"},
            {"type": "reasoning", "summary": [], "content": None},
            {"type": "web_search_call", "id": "ws_1", "action": {"type": "search"}},
        ]
    )
    kinds = [type(item) for item in request.input]
    assert kinds == [
        MessageItem,
        FunctionCallItem,
        FunctionCallOutputItem,
        CustomToolCallItem,
        ReasoningItem,
        WebSearchCallItem,
    ]
    # Still a hosted tool's item: skipped where no search provider is bound.
    assert isinstance(request.input[-1], HostedItem)
    assert request.input[-1].type == "web_search_call"


def test_unknown_fields_in_items_are_ignored():
    request = parse(
        input=[
            {
                "type": "message",
                "id": "msg_made_up",
                "role": "assistant",
                "status": "completed",
                "phase": None,
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            },
            {"type": "function_call_output", "call_id": "c", "output": "ok", "id": "fco_1"},
        ]
    )
    assert request.input[0].content[0].text == "hi"
    assert not hasattr(request.input[0], "status")


def test_unknown_top_level_fields_are_still_refused():
    error = refusal(messages=[])
    assert (error.param, error.code) == ("messages", "unknown_parameter")


@pytest.mark.parametrize("kind", ["bogus_item", "file_search_results", ""])
def test_an_unknown_item_type_is_a_400_naming_it(kind):
    error = refusal(input=[{"role": "user", "content": "hi"}, {"type": kind}])
    assert (error.status, error.param, error.code) == (400, "input[1].type", "invalid_value")
    assert error.message == (
        f"Invalid value: '{kind}'. Input items of type '{kind}' are not supported."
    )


@pytest.mark.parametrize(
    ("item", "param", "message"),
    [
        ({"content": "hi"}, "input[0].type", "Each input item needs a 'type'."),
        ({"type": 5}, "input[0].type", "Each input item needs a 'type'."),
        ("hi", "input[0]", "Each input item must be an object."),
        (["hi"], "input[0]", "Each input item must be an object."),
    ],
)
def test_items_without_a_type_or_not_objects_are_refused(item, param, message):
    error = refusal(input=[item])
    assert (error.status, error.param, error.message) == (400, param, message)


def test_an_error_inside_an_item_names_its_path_not_the_string_form_of_input():
    error = refusal(input=[{"role": "user", "content": "hi"}, {"role": "user"}])
    assert (error.param, error.code) == ("input[1].content", "missing_required_parameter")
    error = refusal(input=[{"type": "function_call", "call_id": "c", "name": 5}])
    assert error.param == "input[0].name" and "string" in error.message


def test_input_that_is_neither_a_string_nor_a_list_is_refused():
    assert refusal(input=5).param == "input"
    assert refusal(input={"role": "user"}).param == "input"


def test_too_many_items_are_refused_before_they_are_read():
    error = refusal(input=[{"type": "bogus"}] * (MAX_INPUT_ITEMS + 1))
    assert error.param == "input" and str(MAX_INPUT_ITEMS) in error.message


def test_each_tool_type_is_its_own_model_and_hosted_ones_keep_their_fields():
    request = parse(
        tools=[
            {"type": "function", "name": "f", "parameters": {"type": "object"}, "extra": 1},
            {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "g"}]},
            {"type": "tool_search", "execution": "client"},
            {"type": "tool_search"},
            {"type": "web_search", "external_web_access": False},
            {"type": "some_future_tool"},
        ]
    )
    kinds = [type(tool) for tool in request.tools]
    assert kinds == [
        FunctionTool,
        CustomTool,
        NamespaceTool,
        ToolSearchTool,
        HostedTool,  # run by the server: dropped
        HostedTool,
        HostedTool,
    ]
    assert request.tools[5].model_dump() == {"type": "web_search", "external_web_access": False}
    assert "extra" not in request.tools[0].model_dump()


@pytest.mark.parametrize(
    ("tool", "param", "message"),
    [
        ("x", "tools[0]", "Each tool must be an object."),
        ({"name": "f"}, "tools[0].type", "Each tool needs a 'type'."),
    ],
)
def test_tools_without_a_type_or_not_objects_are_refused(tool, param, message):
    error = refusal(tools=[tool])
    assert (error.status, error.param, error.message) == (400, param, message)


def test_an_error_inside_a_tool_names_its_path():
    error = refusal(tools=[{"type": "function", "name": ""}])
    assert error.param == "tools[0].name"
    error = refusal(
        tools=[{"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": 5}]}]
    )
    assert error.param == "tools[0].tools[0].name"


def test_tools_loaded_through_tool_search_are_typed_too():
    request = parse(
        input=[
            {"role": "user", "content": "find"},
            {
                "type": "tool_search_output",
                "call_id": "ts",
                "tools": [{"type": "function", "name": "cal"}, {"type": "web_search"}],
            },
        ]
    )
    output = request.input[1]
    assert isinstance(output, ToolSearchOutputItem)
    assert [type(tool) for tool in output.tools] == [FunctionTool, HostedTool]
    error = refusal(
        input=[{"type": "tool_search_output", "call_id": "ts", "tools": [{"name": "x"}]}]
    )
    assert error.param == "input[0].tools[0].type"


@pytest.mark.parametrize("name", sorted(p.stem for p in CODEX.glob("*_request.json")))
def test_codex_requests_are_typed_entirely(name):
    request = CreateResponse.model_validate(orjson.loads((CODEX / f"{name}.json").read_bytes()))
    assert not any(isinstance(item, dict) for item in request.input)
    assert not any(isinstance(tool, dict) for tool in request.tools)
    assert isinstance(request.input[0], MessageItem) and request.input[0].role == "developer"


def test_items_and_tools_already_typed_are_taken_as_they_are():
    message = MessageItem(role="user", content="hi")
    tool = FunctionTool(type="function", name="f")
    request = CreateResponse(model="m", input=[message, HostedItem(type="web_search_call")])
    assert request.input[0] is message and isinstance(request.input[1], HostedItem)
    assert parse(tools=[tool]).tools == [tool]


def test_a_tool_parameter_schema_that_is_not_an_object_is_refused():
    error = refusal(tools=[{"type": "function", "name": "f", "parameters": [1]}])
    assert (error.param, error.code) == ("tools[0].parameters", "invalid_value")
    assert error.message == "Invalid value for 'tools[0].parameters': input should be an object."
