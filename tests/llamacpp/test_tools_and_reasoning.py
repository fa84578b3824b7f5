"""Function tools and reasoning through Switchyard to a real llama-server.

stories260K never calls a tool nor thinks by itself, so the tests use the
techniques recorded in tests/fixtures/llamacpp/README.md: a tool-aware ChatML
template and an assistant message prefilled with the ``<tool_call>`` (the
last input item, which the server continues), with the backend's
``extra_body`` forcing end-of-sequence; and a template that opens ``<think>``.
"""

from __future__ import annotations

import json

import pytest
from openai import APIStatusError

from tests.conftest import wait_rows
from tests.llamacpp.conftest import FORCE_EOS

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
]

QUESTION = {"role": "user", "content": "What is the weather in Paris?"}


def weather_tool(**city: object) -> dict:
    return {
        "type": "function",
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", **city}},
            "required": ["city"],
        },
    }


TIME_TOOL = {
    "type": "function",
    "name": "get_time",
    "description": "Get the time in a zone.",
    "parameters": {
        "type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC"]}},
        "required": ["zone"],
    },
}


def prefill(*cities: str) -> dict:
    """An assistant turn already holding the calls, for the server to continue."""
    blocks = [
        "<tool_call>\n"
        + json.dumps({"name": "get_weather", "arguments": {"city": city}})
        + "\n</tool_call>"
        for city in cities
    ]
    return {"role": "assistant", "content": "\n".join(blocks)}


def test_a_function_tool_round_trip(llama_tools, llama_tenant):
    caller = llama_tenant(
        llama_tools, model="stories-tools", backend_name="llama-tools", extra_body=FORCE_EOS
    )
    with caller.client.responses.stream(
        model="stories-tools",
        input=[QUESTION, prefill("Paris")],
        tools=[weather_tool()],
        temperature=0,
        max_output_tokens=16,
    ) as stream:
        events = list(stream)
        first = stream.get_final_response()
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id and call.status == "completed"
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [json.loads(e.arguments) for e in done] == [{"city": "Paris"}]
    assert first.status == "completed" and first.usage.input_tokens > 0

    # The result goes back with the call; a backend without the forced EOS
    # lets the model answer in text (up to its first line break).
    answerer = llama_tenant(
        llama_tools,
        model="stories-answers",
        backend_name="llama-tools-answers",
        extra_body={"stop": ["\n"]},
    )
    second = answerer.client.responses.create(
        model="stories-answers",
        input=[
            QUESTION,
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"},
        ],
        tools=[weather_tool()],
        temperature=0,
        max_output_tokens=96,
    )
    assert second.status == "completed"
    assert [item.type for item in second.output] == ["message"]
    assert second.output_text
    assert second.usage.input_tokens > first.usage.input_tokens
    rows = wait_rows(2, organisation=caller.organisation)
    assert [r.status for r in rows] == [200, 200]


def test_two_prefilled_calls_come_back_as_two_function_calls(llama_tools, llama_tenant):
    caller = llama_tenant(llama_tools, extra_body=FORCE_EOS)
    response = caller.client.responses.create(
        model="stories",
        input=[QUESTION, prefill("Paris", "London")],
        tools=[weather_tool()],
        temperature=0,
        max_output_tokens=16,
    )
    assert [item.type for item in response.output] == ["function_call", "function_call"]
    assert [json.loads(item.arguments)["city"] for item in response.output] == [
        "Paris",
        "London",
    ]
    assert response.output[0].call_id != response.output[1].call_id


def test_a_named_tool_choice_makes_the_server_call_that_tool(llama_tools, llama_tenant):
    """llama-server ignores an object tool_choice (it would answer without a
    call); the llamacpp dialect sends "required" with only the named tool.
    Offered both tools freely, this model picks get_time."""
    caller = llama_tenant(llama_tools, extra_body=FORCE_EOS)
    response = caller.client.responses.create(
        model="stories",
        input=[QUESTION, {"role": "assistant", "content": "<tool_call>\n"}],
        tools=[weather_tool(enum=["Paris"]), TIME_TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        temperature=0,
        max_output_tokens=96,
    )
    (call,) = response.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert response.tool_choice.name == "get_weather"
    assert [tool.name for tool in response.tools] == ["get_weather", "get_time"]


def test_reasoning_comes_back_as_a_reasoning_item(llama_think, llama_tenant):
    """The server runs with --reasoning-format none; the dialect asks it to
    split the thinking out, so no <think> tag reaches the text."""
    caller = llama_tenant(llama_think)
    stream = caller.client.responses.create(
        model="stories",
        input="Tell me a story about a cat.",
        reasoning={"effort": "high", "max_tokens": 64},
        temperature=0,
        max_output_tokens=6,
        stream=True,
    )
    events = list(stream)
    final = events[-1].response
    assert events[-1].type == "response.incomplete"  # the tiny model never closes </think>
    assert [item.type for item in final.output] == ["reasoning"]
    text = final.output[0].content[0].text
    deltas = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert text == deltas and text and "<think>" not in text
    assert final.usage.output_tokens_details.reasoning_tokens == final.usage.output_tokens == 6
    row = wait_rows(organisation=caller.organisation)[0]
    assert row.reasoning_tokens == 6


def test_without_reasoning_effort_thinking_is_switched_off(llama_think, llama_tenant):
    caller = llama_tenant(llama_think)
    response = caller.client.responses.create(
        model="stories", input="Tell me a story about a cat.", temperature=0, max_output_tokens=6
    )
    assert [item.type for item in response.output] == ["message"]
    assert response.output_text and "think>" not in response.output_text
    assert response.usage.output_tokens_details.reasoning_tokens == 0


def test_a_reasoning_item_in_input_reaches_the_server_as_reasoning_content(
    llama_think, llama_tenant
):
    """The template renders an assistant turn's ``reasoning_content`` inside
    <think>; continuing that turn, the server gives it back as reasoning."""
    caller = llama_tenant(llama_think)
    response = caller.client.responses.create(
        model="stories",
        input=[
            {"role": "user", "content": "Tell me a story about a cat."},
            {
                "type": "reasoning",
                "id": "rs_given",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "The user wants a story."}],
            },
            {"role": "assistant", "content": "Once"},
        ],
        reasoning={"effort": "high"},
        temperature=0,
        max_output_tokens=6,
    )
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].text.strip() == "The user wants a story."
    assert response.output_text.startswith("Once")


@pytest.mark.parametrize("stream", [True, False])
def test_an_error_after_the_stream_started_fails_the_response(llama_tools, llama_tenant, stream):
    """Without the forced EOS the model writes on after the prefilled call,
    the server cannot parse it and sends ``data: {"error": …}`` mid-stream
    (HTTP 200 already, no [DONE])."""
    caller = llama_tenant(llama_tools)
    request = {
        "model": "stories",
        "input": [QUESTION, prefill("Paris")],
        "tools": [weather_tool()],
        "temperature": 0,
        "max_output_tokens": 16,
    }
    if stream:
        events = list(caller.client.responses.create(**request, stream=True))
        assert events[-1].type == "response.failed"
        assert events[-1].response.error.code == "server_error"
        message = events[-1].response.error.message
        assert message == "Backend 'llama' reported an error mid-stream."
    else:
        with pytest.raises(APIStatusError) as error:
            caller.client.responses.create(**request)
        assert error.value.status_code == 502
        assert error.value.body["code"] == "server_error"
    row = wait_rows(organisation=caller.organisation)[0]
    assert row.status == 502 and row.error_code == "server_error"
    # What the server said is kept for support, not told the client.
    assert "format" in row.error_message
