"""The Responses API through the official OpenAI SDK, against the ASGI
application in-process."""

from __future__ import annotations

import base64
import io
import json
import logging

import httpx
import pytest
from django.test import override_settings
from pydantic import BaseModel

from tests.conftest import wait_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(provision, local_simulator):
    return provision("acme", local_simulator.url, dialect="vllm")


@pytest.fixture
def client(gateway, acme):
    return gateway.openai(acme.key)


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def test_item_input_with_every_role(client):
    response = client.responses.create(
        model="sim-model",
        input=[
            {"role": "system", "content": "sys"},
            {"role": "developer", "content": "dev"},
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": [{"type": "input_text", "text": "[[text:fine]]"}]},
        ],
    )
    assert response.output_text == "fine"
    assert response.output[0].type == "message" and response.output[0].role == "assistant"


def test_function_tool_loop_sends_output_items_back_as_they_are(client):
    first = client.responses.create(
        model="sim-model",
        input='Weather? [[call:get_weather {"city": "Paris"}]]',
        tools=[WEATHER],
    )
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    second = client.responses.create(
        model="sim-model",
        input=[
            {"role": "user", "content": 'Weather? [[call:get_weather {"city": "Paris"}]]'},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21C"},
        ],
        tools=[WEATHER],
    )
    assert second.output_text == "Tool result: sunny, 21C"


def test_parallel_calls_stream_interleaved(client):
    prompt = (
        '[[interleave]] [[call:get_weather {"city": "Paris, France"}]] '
        '[[call:get_weather {"city": "Oslo, Norway"}]]'
    )
    with client.responses.stream(model="sim-model", input=prompt, tools=[WEATHER]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    cities = [json.loads(item.arguments)["city"] for item in final.output]
    assert cities == ["Paris, France", "Oslo, Norway"]
    done = [e for e in events if e.type == "response.output_item.done"]
    assert len(done) == 2 and final.status == "completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))


class Person(BaseModel):
    name: str
    age: int
    tags: list[str]


def test_parse_with_a_pydantic_model(client):
    response = client.responses.parse(model="sim-model", input="Who?", text_format=Person)
    person = response.output_parsed
    assert isinstance(person, Person) and person.tags


def test_stream_with_reasoning_on_and_off(client):
    with client.responses.stream(
        model="sim-model", input="[[tokens:3]]", reasoning={"effort": "high"}
    ) as stream:
        reasoning_deltas = [e.delta for e in stream if e.type == "response.reasoning_text.delta"]
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert "".join(reasoning_deltas) == final.output[0].content[0].text
    assert final.usage.output_tokens_details.reasoning_tokens > 0
    assert final.reasoning.effort == "high"
    off = client.responses.create(model="sim-model", input="[[tokens:3]]")
    assert [item.type for item in off.output] == ["message"]


def test_reasoning_items_are_accepted_back(client):
    first = client.responses.create(
        model="sim-model", input="[[tokens:2]]", reasoning={"effort": "low"}
    )
    follow = client.responses.create(
        model="sim-model",
        input=[
            {"role": "user", "content": "[[tokens:2]]"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"role": "user", "content": "[[text:again]]"},
        ],
    )
    assert follow.output_text == "again"


def test_namespace_tool_call_comes_back_with_its_namespace(client):
    tools = [
        {
            "type": "namespace",
            "name": "agents",
            "description": "Agent tools",
            "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object"}}],
        }
    ]
    response = client.responses.create(
        model="sim-model", input="[[call:agents__spawn {}]]", tools=tools
    )
    (call,) = response.output
    assert (call.type, call.name, call.namespace) == ("function_call", "spawn", "agents")


def test_custom_tool_call_streams_its_input(client):
    patch = '*** Begin Patch\n*** Add File: a.txt\n+caf\u00e9 "quoted"\n*** End Patch\n'
    tools = [{"type": "custom", "name": "apply_patch", "description": "Edit files"}]
    prompt = "[[call:apply_patch " + json.dumps({"input": patch}) + "]]"
    with client.responses.stream(model="sim-model", input=prompt, tools=tools) as stream:
        deltas = [e.delta for e in stream if e.type == "response.custom_tool_call_input.delta"]
        final = stream.get_final_response()
    (call,) = final.output
    assert call.type == "custom_tool_call" and call.input == patch and call.name == "apply_patch"
    assert len(deltas) > 2 and "".join(deltas) == patch


def test_image_and_file_parts(client, acme):
    acme.model.supports_vision = True
    acme.model.save(update_fields=["supports_vision"])
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    data = base64.b64encode(b"name,qty\napples,3\n").decode()
    response = client.responses.create(
        model="sim-model",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "[[text:seen]]"},
                    {"type": "input_image", "image_url": png},
                    {"type": "input_file", "filename": "list.csv", "file_data": data},
                ],
            }
        ],
    )
    assert response.output_text == "seen"


def test_images_are_refused_for_a_model_without_vision(client):
    from openai import BadRequestError

    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(
            model="sim-model",
            input=[{"role": "user", "content": [{"type": "input_image", "image_url": png}]}],
        )
    assert caught.value.body["param"] == "input[0].content[0]"


def test_length_cut_off_is_incomplete(client):
    response = client.responses.create(
        model="sim-model", input="[[tokens:20]]", max_output_tokens=4
    )
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 4 and response.max_output_tokens == 4


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("server", "server_error"),
        ("rate_limit", "rate_limit_exceeded"),
        ("invalid_prompt", "invalid_prompt"),
    ],
)
def test_failure_mid_stream_ends_with_response_failed(client, acme, kind, code):
    stream = client.responses.create(
        model="sim-model", input=f"[[tokens:10]] [[fail-after:3 {kind}]]", stream=True
    )
    events = list(stream)
    terminal = [e for e in events if e.type in {"response.completed", "response.failed"}]
    assert [e.type for e in terminal] == ["response.failed"]
    assert terminal[0].response.error.code == code
    assert wait_rows(organisation=acme.organisation)[0].error_code == code


def test_envelope_echoes_settings_and_carries_switchyard_extras(gateway, acme):
    response = gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {acme.key}"},
        json={
            "model": "sim-model",
            "input": "[[tokens:2]]",
            "instructions": "Be brief.",
            "temperature": 0.3,
            "top_p": 0.9,
            "max_output_tokens": 50,
            "metadata": {"k": "v"},
            "tools": [WEATHER, {"type": "web_search"}],
            "parallel_tool_calls": False,
            "store": True,
            "text": {"verbosity": "low"},
        },
        timeout=30,
    )
    body = response.json()
    assert response.status_code == 200, body
    for name, value in {
        "object": "response",
        "instructions": "Be brief.",
        "temperature": 0.3,
        "top_p": 0.9,
        "max_output_tokens": 50,
        "metadata": {"k": "v"},
        "parallel_tool_calls": False,
        "store": False,
        "error": None,
        "truncation": "disabled",
        "background": False,
    }.items():
        assert body[name] == value, name
    assert body["tools"][0]["strict"] is True
    assert body["text"]["verbosity"] == "low"
    assert body["usage"]["input_tokens_details"]["cached_tokens"] >= 0
    notices = {n["code"] for n in body["switchyard"]["notices"]}
    assert notices == {"hosted_tools_dropped", "store_ignored"}
    assert set(body["switchyard"]["timing"]) == {
        "queue_wait_ms",
        "ttft_ms",
        "duration_ms",
        "tokens_per_second",
    }


REFUSALS = [
    ({"messages": []}, "messages"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"max_output_tokens": "ten"}, "max_output_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"max_tool_calls": -1}, "max_tool_calls"),
    ({"reasoning": {"max_tokens": -5}}, "reasoning.max_tokens"),
    ({"background": True}, "background"),
    ({"conversation": {"id": "conv_1"}}, "conversation"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt"),
    ({"context_management": [{"type": "truncate"}]}, "context_management[0].type"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"truncation": "auto"}, "truncation"),
    ({"include": ["message.output_text.logprobs"]}, "include"),
    ({"tool_choice": {"type": "web_search"}}, "tool_choice"),
    ({"previous_response_id": "resp_123"}, "previous_response_id"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"input": [{"type": "mystery"}]}, "input[0].type"),
    (
        {
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_image", "image_url": "https://x.test/a.png"}],
                }
            ]
        },
        "input[0].content[0]",
    ),
]


@pytest.mark.parametrize(("fields", "param"), REFUSALS)
def test_every_refusal_is_a_400_naming_the_parameter(client, fields, param):
    from openai import BadRequestError

    body = {"model": "sim-model", "input": "hi", **fields}
    with pytest.raises(BadRequestError) as caught:
        client.post("/responses", body=body, cast_to=httpx.Response)
    error = caught.value.body
    assert caught.value.status_code == 400
    assert error["param"] == param and error["message"] and error["type"] == "invalid_request_error"


def test_accepted_fields_do_not_change_the_answer(client):
    plain = client.responses.create(model="sim-model", input="same")
    busy = client.responses.create(
        model="sim-model",
        input="same",
        metadata={"a": "b"},
        user="u1",
        safety_identifier="s1",
        prompt_cache_key="pck",
        prompt_cache_retention="24h",
        service_tier="auto",
        top_logprobs=0,
        truncation="disabled",
        background=False,
        include=["reasoning.encrypted_content", "message.input_image.image_url"],
        store=False,
        reasoning={"summary": "auto"},
        text={"verbosity": "high"},
        extra_body={"client_metadata": {"marker": "cm-secret-marker"}},
    )
    assert busy.output_text == plain.output_text


def test_client_metadata_reaches_no_log(client):
    """Every log line of the request and of the backend, formatted as a
    server writes them (text and JSON), extra fields included."""
    from config.logging import JsonFormatter, TextFormatter

    written = io.StringIO()
    handlers = [logging.StreamHandler(written), logging.StreamHandler(written)]
    handlers[0].setFormatter(TextFormatter())
    handlers[1].setFormatter(JsonFormatter())
    root = logging.getLogger()
    for handler in handlers:
        root.addHandler(handler)
    try:
        client.responses.create(
            model="sim-model",
            input="hi",
            extra_body={"client_metadata": {"marker": "cm-secret-marker-2"}},
        )
    finally:
        for handler in handlers:
            root.removeHandler(handler)
    assert "switchyard.requests" in written.getvalue()  # the request's line was read
    assert "cm-secret-marker-2" not in written.getvalue()


@override_settings(SWITCHYARD_KEEPALIVE_SECONDS=0.2)
def test_in_progress_repeats_while_the_backend_is_silent(gateway, provision, local_simulator):
    tenant = provision("acme", local_simulator.url)
    client = gateway.openai(tenant.key)
    stream = client.responses.create(
        model="sim-model", input="[[delay:1200]] [[tokens:2]]", stream=True
    )
    kinds = [e.type for e in stream]
    first_item = kinds.index("response.output_item.added")
    assert kinds[:first_item].count("response.in_progress") >= 3
    assert kinds[-1] == "response.completed"
