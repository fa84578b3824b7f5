"""One response over several backend calls, with the MCP tools the gateway
runs between them: the items, the events the OpenAI SDK reads, the usage
that adds up, and the history a client sends back."""

from __future__ import annotations

import orjson
import pytest

from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.body import CreateResponse
from responses_api.translate.request import ModelLimits, prepare_chat
from responses_api.translate.tool_turns import (
    ListedTool,
    execution_error,
    http_error,
    list_tools,
    mcp_error_text,
    mcp_output_text,
    mcp_result,
    next_call,
    protocol_error,
    waiting_calls,
)
from responses_api.translate.tools import ChatTools
from tests.translate.test_stream import chunk, sdk_replay, translator, types

ADD = ListedTool(
    "add",
    "Adds two numbers.",
    {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
)
LOOKUP = ListedTool("lookup", "", {"type": "object"}, read_only=True)


def mcp_translator():
    tools = ChatTools()
    tools.add_mcp("calc", ADD.name, ADD.description, ADD.input_schema)
    return translator(tools=tools.refs), tools


def call_chunks(chat_name: str, arguments: list[str]):
    first = {"index": 0, "id": "call_1", "function": {"name": chat_name, "arguments": ""}}
    yield chunk({"tool_calls": [first]})
    for piece in arguments:
        yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    yield chunk({}, finish="tool_calls")
    yield chunk(usage={"prompt_tokens": 40, "completion_tokens": 9})


def test_an_mcp_tool_is_offered_as_a_function_named_for_its_server():
    tools = ChatTools()
    tools.add_mcp("calc", "add", "Adds two numbers.", ADD.input_schema)
    tools.add_mcp("calc", "add", "again", {})  # once per server and name
    [offered] = tools.chat_tools
    assert offered["function"]["name"] == "calc__add"
    assert offered["function"]["parameters"] == ADD.input_schema
    ref = tools.refs["calc__add"]
    assert (ref.kind, ref.name, ref.namespace) == ("mcp", "add", "calc")


def test_a_call_then_the_answer_are_one_response_the_sdk_reads():
    t, tools = mcp_translator()
    events = list(t.start())
    events += list_tools(t, "calc", [ADD, LOOKUP])
    for c in call_chunks("calc__add", ['{"a": 2', ', "b": 3}']):
        events += t.feed(c)
    events += t.close_items()
    [waiting] = waiting_calls(t)
    assert waiting.done_item is not None and waiting.done_item["status"] == "calling"
    assert waiting.done_item["arguments"] == '{"a": 2, "b": 3}'
    events += mcp_result(waiting, output="5")
    assert waiting_calls(t) == []
    next_call(t)
    events += t.feed(chunk({"content": "The sum is 5."}, finish="stop"))
    events += t.feed(chunk(usage={"prompt_tokens": 60, "completion_tokens": 6}))
    events += t.finish({})
    EventWriter().encode(events)

    assert types(events)[2:8] == [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.mcp_call.in_progress",
    ]
    assert "response.mcp_call_arguments.delta" in types(events)
    assert "response.mcp_call_arguments.done" in types(events)
    assert "response.mcp_call.completed" in types(events)
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    listed, call, message = final["output"]
    assert [tool["name"] for tool in listed["tools"]] == ["add", "lookup"]
    assert listed["tools"][1]["annotations"] == {"read_only": True}
    assert (call["server_label"], call["name"], call["output"]) == ("calc", "add", "5")
    assert call["status"] == "completed" and call["error"] is None
    assert message["content"][0]["text"] == "The sum is 5."
    # The indexes go on from one backend call to the next.
    added = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
    assert added == [0, 1, 2]
    # Both calls' usage, added up.
    assert final["usage"]["input_tokens"] == 100
    assert final["usage"]["output_tokens"] == 15
    # The OpenAI SDK's own stream state takes every event, in order.
    rebuilt = sdk_replay(events)
    assert rebuilt.output[1].type == "mcp_call" and rebuilt.output[1].output == "5"
    assert rebuilt.output_text == "The sum is 5."


def test_a_failed_call_and_a_server_that_could_not_list_say_so():
    t, _ = mcp_translator()
    events = list(t.start())
    events += list_tools(t, "down", [], error="The server did not answer within 10 s.")
    for c in call_chunks("calc__add", ['{"a": 1, "b": 1}']):
        events += t.feed(c)
    events += t.close_items()
    [waiting] = waiting_calls(t)
    events += mcp_result(waiting, error=execution_error("Tool 'add' failed: division by zero"))
    next_call(t)
    events += t.feed(chunk({"content": "It failed."}, finish="stop"))
    events += t.finish({})
    assert "response.mcp_list_tools.failed" in types(events)
    assert "response.mcp_call.failed" in types(events)
    listed, call, _ = events[-1]["response"]["output"]
    assert listed["error"] == "The server did not answer within 10 s." and listed["tools"] == []
    assert call["status"] == "failed" and call["output"] is None
    assert call["error"] == {
        "type": "mcp_tool_execution_error",
        "content": [{"type": "text", "text": "Tool 'add' failed: division by zero"}],
    }


@pytest.mark.parametrize(
    ("error", "text"),
    [
        ("an older response's sentence", "an older response's sentence"),
        (protocol_error(-32602, "bad params"), "bad params"),
        (http_error(502, "The MCP server answered HTTP 502."), "The MCP server answered HTTP 502."),
        (execution_error("out of paper"), "out of paper"),
        (
            {
                "type": "mcp_tool_execution_error",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "image"},
                    {"type": "text", "text": "b"},
                ],
            },
            "a\nb",
        ),
        ({"type": "mcp_tool_execution_error", "content": "plain"}, "plain"),
        (
            {"type": "mcp_tool_execution_error", "content": {"k": 1}},
            '{"type":"mcp_tool_execution_error","content":{"k":1}}',
        ),
        ({"type": "tool_execution_error", "message": "missing a"}, "missing a"),
    ],
)
def test_the_model_reads_the_text_of_each_error_shape(error, text):
    assert mcp_error_text(error) == text
    assert mcp_output_text(None, error) == f"The tool call failed: {text}"


def test_calls_dropped_in_an_earlier_answer_keep_their_notice():
    tools = ChatTools()
    tools.add_mcp("calc", ADD.name, ADD.description, ADD.input_schema)
    t = translator(tools=tools.refs, max_tool_calls=1)
    list(t.start())
    # The model calls twice; max_tool_calls keeps one.
    for index in (0, 1):
        first = {"index": index, "id": f"call_{index}", "function": {"name": "calc__add"}}
        t.feed(chunk({"tool_calls": [first]}))
        t.feed(chunk({"tool_calls": [{"index": index, "function": {"arguments": "{}"}}]}))
    t.close_items()
    [waiting] = waiting_calls(t)
    mcp_result(waiting, output="0")
    next_call(t)
    # The next answer calls again at index 0: a new call, not a dropped one.
    for c in call_chunks("calc__add", ['{"a": 1, "b": 1}']):
        t.feed(c)
    t.close_items()
    assert len(waiting_calls(t)) == 1
    mcp_result(waiting_calls(t)[0], output="2")
    next_call(t)
    t.feed(chunk({"content": "Done."}, finish="stop"))
    final = t.finish({})[-1]["response"]
    assert [n for n in t.notices() if n[0] == "tool_calls_dropped"] == [
        (
            "tool_calls_dropped",
            "max_tool_calls is 1: the model made 1 more tool call, which was dropped.",
        )
    ]
    assert [item["type"] for item in final["output"]] == ["mcp_call", "mcp_call", "message"]


def test_a_call_never_run_ends_incomplete_when_the_response_fails():
    t, _ = mcp_translator()
    events = list(t.start())
    for c in call_chunks("calc__add", ['{"a": 1']):
        events += t.feed(c)
    events += t.fail("server_error", "The tool loop stopped.", {})
    [call] = events[-1]["response"]["output"]
    assert call["type"] == "mcp_call" and call["status"] == "incomplete"


def test_an_mcp_call_sent_back_is_the_models_call_and_its_result():
    request = CreateResponse.model_validate(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "Add 2 and 3."},
                {
                    "type": "mcp_call",
                    "id": "mcp_1",
                    "server_label": "calc",
                    "name": "add",
                    "arguments": '{"a": 2, "b": 3}',
                    "output": "5",
                },
                {
                    "type": "mcp_call",
                    "id": "mcp_2",
                    "server_label": "calc",
                    "name": "add",
                    "arguments": "{}",
                    "error": {"type": "tool_execution_error", "message": "missing a"},
                },
                {"role": "user", "content": "Thanks."},
            ],
        }
    )
    draft = prepare_chat(request, limits=ModelLimits())
    messages = draft.body["messages"]
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "user"]
    first, second = messages[1]["tool_calls"], messages[3]["tool_calls"]
    assert [c["id"] for c in first + second] == ["mcp_1", "mcp_2"]
    assert first[0]["function"] == {"name": "calc__add", "arguments": '{"a": 2, "b": 3}'}
    assert messages[2] == {"role": "tool", "tool_call_id": "mcp_1", "content": "5"}
    assert messages[4]["content"] == "The tool call failed: missing a"
    assert not any(n["code"] == "hosted_items_skipped" for n in draft.notices)
    orjson.dumps(draft.body)  # all of it JSON
