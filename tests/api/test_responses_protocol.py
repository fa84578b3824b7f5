"""What a strict client checks, against the ASGI application in-process.

Streams read as sent (raw SSE) by the strict reader of ``tests.grammar``;
what the backend received is read back from the simulator.
"""

from __future__ import annotations

import json

import pytest
from openai import BadRequestError

from tests.conftest import wait_rows
from tests.grammar import check_stream
from tests.sim import received

pytestmark = pytest.mark.django_db

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object"}}
PATCH = {"type": "custom", "name": "apply_patch"}
PARALLEL = (
    '[[interleave]] [[call:get_weather {"city": "Paris, France", "unit": "celsius"}]] '
    '[[call:get_weather {"city": "Oslo, Norway"}]] '
    '[[call:apply_patch {"input": "*** Begin Patch\\n+caf\\u00e9\\n*** End Patch\\n"}]]'
)


@pytest.fixture
def acme(provision, local_simulator):
    return provision("acme", local_simulator.url, dialect="vllm")


@pytest.fixture
def client(gateway, acme):
    return gateway.openai(acme.key)


def sse(gateway, key: str, body: dict) -> list[dict]:
    """A stream's events, as the server sent them."""
    events = []
    with gateway.http.stream(
        "POST",
        "/v1/responses",
        json={**body, "stream": True},
        headers={"authorization": f"Bearer {key}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return events


def test_interleaved_parallel_calls_stream_one_item_after_another(gateway, acme, client):
    body = {"model": "sim-model", "input": PARALLEL, "tools": [WEATHER, PATCH]}
    events = sse(gateway, acme.key, body)
    final = check_stream(events)
    assert [(item["type"], item["status"]) for item in final["output"]] == [
        ("function_call", "completed"),
        ("function_call", "completed"),
        ("custom_tool_call", "completed"),
    ]
    cities = [json.loads(item["arguments"])["city"] for item in final["output"][:2]]
    assert cities == ["Paris, France", "Oslo, Norway"]
    assert final["output"][2]["input"] == "*** Begin Patch\n+caf\u00e9\n*** End Patch\n"
    # The SDK's stream helper rebuilds the same answer, and a non-streamed
    # request gets the same items in the same order.
    with client.responses.stream(**body) as stream:
        rebuilt = stream.get_final_response()
    whole = client.responses.create(**body)
    for answer in (rebuilt, whole):
        assert [
            item.model_dump(exclude={"id", "call_id"}, exclude_none=True) for item in answer.output
        ] == [
            {k: v for k, v in item.items() if k not in {"id", "call_id"}}
            for item in final["output"]
        ]


def test_allowed_tools_reach_the_backend_alone_with_the_mode(client, local_simulator):
    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "get_time"}],
    }
    response = client.responses.create(
        model="sim-model",
        input="allowed-marker-1 [[call:get_time {}]]",
        tools=[WEATHER, TIME, PATCH],
        tool_choice=choice,
    )
    (call,) = response.output
    assert call.name == "get_time"
    assert response.tool_choice.model_dump() == choice
    sent = received(local_simulator, "allowed-marker-1")
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["get_time"]
    assert sent["tool_choice"] == "required"


def test_a_tool_the_client_did_not_allow_is_never_offered(client, local_simulator):
    choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "custom", "name": "apply_patch"}],
    }
    response = client.responses.create(
        model="sim-model",
        # The simulator calls a tool only when it is offered.
        input='allowed-marker-2 [[call:get_weather {"city": "Oslo"}]]',
        tools=[WEATHER, PATCH],
        tool_choice=choice,
    )
    assert [item.type for item in response.output] == ["message"]
    sent = received(local_simulator, "allowed-marker-2")
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["apply_patch"]
    assert sent["tool_choice"] == "auto"


def test_an_allowed_tool_that_is_not_among_the_tools_is_a_400(client, acme):
    choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "get_time"}, {"type": "function", "name": "nope"}],
    }
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(model="sim-model", input="hi", tools=[TIME], tool_choice=choice)
    error = caught.value.body
    assert error["param"] == "tool_choice.tools[1]" and "nope" in error["message"]
    assert caught.value.response.headers["x-request-id"]
    assert wait_rows(organisation=acme.organisation)[0].status == 400


def test_calls_dropped_by_max_tool_calls_get_a_notice(gateway, acme):
    prompt = (
        '[[call:get_weather {"city": "A"}]] [[call:get_weather {"city": "B"}]] [[call:get_time {}]]'
    )
    body = {"model": "sim-model", "input": prompt, "tools": [WEATHER, TIME], "max_tool_calls": 1}
    reply = gateway.http.post(
        "/v1/responses",
        json=body,
        headers={"authorization": f"Bearer {acme.key}"},
        timeout=30,
    ).json()
    assert len(reply["output"]) == 1
    (notice,) = [n for n in reply["switchyard"]["notices"] if n["code"] == "tool_calls_dropped"]
    assert "2 more tool calls" in notice["message"]
    streamed = check_stream(sse(gateway, acme.key, body))
    assert "tool_calls_dropped" in [n["code"] for n in streamed["switchyard"]["notices"]]
    rows = wait_rows(organisation=acme.organisation, count=2)
    assert all("tool_calls_dropped" in row.notices for row in rows)


def test_a_failed_stream_marks_its_unfinished_message_incomplete(gateway, acme):
    body = {"model": "sim-model", "input": "[[tokens:8]] [[fail-after:3]]"}
    events = sse(gateway, acme.key, body)
    final = check_stream(events)
    assert events[-1]["type"] == "response.failed" and final["status"] == "failed"
    (message,) = final["output"]
    assert message["type"] == "message" and message["status"] == "incomplete"
    assert message["content"][0]["text"]
