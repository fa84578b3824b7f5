"""Text through Switchyard to a real llama-server: the OpenAI SDK as the client.

stories260K decodes greedily at temperature 0, so what Switchyard returns can
be compared with what llama-server itself answers to the same chat request.
"""

from __future__ import annotations

import re

import httpx
import pytest
from openai import APIStatusError
from pydantic import BaseModel, Field

from tests.conftest import wait_for, wait_rows
from tests.llamacpp.conftest import UPSTREAM_MODEL

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
]

PROMPT = "Tell me a story about a cat."
# stories260K never writes EOS on its own; a backend-wide stop sequence ends
# its first line, so a response can complete (the Responses API has no `stop`).
STOP_AT_NEWLINE = {"stop": ["\n"]}
LONG_INPUT = "Once upon a time there was a little cat who liked to play in the garden. " * 12


def direct(server, prompt: str, max_tokens: int, **extra) -> dict:
    """What llama-server answers without Switchyard (thinking off, as Switchyard sends)."""
    response = httpx.post(
        server.url + "/chat/completions",
        json={
            "model": UPSTREAM_MODEL,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": max_tokens,
            "chat_template_kwargs": {"enable_thinking": False},
            **extra,
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_response_carries_the_servers_text_and_usage(llama_plain, llama_tenant):
    tenant = llama_tenant(llama_plain, extra_body=STOP_AT_NEWLINE)
    response = tenant.client.responses.create(
        model="stories", input=PROMPT, temperature=0, max_output_tokens=32
    )
    expected = direct(llama_plain, PROMPT, 32, **STOP_AT_NEWLINE)
    assert expected["choices"][0]["finish_reason"] == "stop"
    assert response.status == "completed"
    assert response.output_text == expected["choices"][0]["message"]["content"]
    assert response.output_text
    assert response.usage.input_tokens == expected["usage"]["prompt_tokens"]
    assert response.usage.output_tokens == expected["usage"]["completion_tokens"]
    assert response.usage.total_tokens == expected["usage"]["total_tokens"]
    assert response.switchyard["backend"]["name"] == "llama"
    row = wait_rows(organisation=tenant.organisation)[0]
    assert row.status == 200 and row.backend_name == "llama" and not row.stream
    assert (row.input_tokens, row.output_tokens) == (
        response.usage.input_tokens,
        response.usage.output_tokens,
    )


def test_max_output_tokens_cuts_the_answer_as_incomplete(llama_plain, llama_tenant):
    tenant = llama_tenant(llama_plain)
    response = tenant.client.responses.create(
        model="stories", input=PROMPT, temperature=0, max_output_tokens=12
    )
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 12
    assert (
        response.output_text == direct(llama_plain, PROMPT, 12)["choices"][0]["message"]["content"]
    )


def test_a_streamed_response_equals_its_deltas_and_reports_usage(llama_plain, llama_tenant):
    tenant = llama_tenant(llama_plain, extra_body=STOP_AT_NEWLINE)
    with tenant.client.responses.stream(
        model="stories", input=PROMPT, temperature=0, max_output_tokens=32
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    expected = direct(llama_plain, PROMPT, 32, **STOP_AT_NEWLINE)
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == final.output_text == expected["choices"][0]["message"]["content"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.completed"
    assert final.usage.input_tokens == expected["usage"]["prompt_tokens"]
    assert final.usage.output_tokens == expected["usage"]["completion_tokens"]
    row = wait_rows(organisation=tenant.organisation)[0]
    assert row.stream and row.status == 200 and row.ttft_ms is not None
    assert row.output_tokens == final.usage.output_tokens


def test_a_repeated_prompt_reports_cached_tokens(llama_plain, llama_tenant):
    tenant = llama_tenant(llama_plain)
    prompt = "Tell me a story about a dog who found a red ball in the park."
    first = tenant.client.responses.create(
        model="stories", input=prompt, temperature=0, max_output_tokens=4
    )
    second = tenant.client.responses.create(
        model="stories", input=prompt, temperature=0, max_output_tokens=4
    )
    assert second.usage.input_tokens == first.usage.input_tokens
    cached = second.usage.input_tokens_details.cached_tokens
    # llama.cpp re-evaluates the last prompt token, so at most all but one are cached.
    assert 0 < cached < second.usage.input_tokens
    stream = tenant.client.responses.create(
        model="stories", input=prompt, temperature=0, max_output_tokens=4, stream=True
    )
    streamed = [e for e in stream if e.type == "response.incomplete"][0].response
    assert streamed.usage.input_tokens_details.cached_tokens > 0
    rows = wait_rows(3, organisation=tenant.organisation)
    assert [r.cached_tokens > 0 for r in rows] == [
        first.usage.input_tokens_details.cached_tokens > 0,
        True,
        True,
    ]


class Pet(BaseModel):
    # maxLength makes the grammar close the string, so the tiny model ends.
    name: str = Field(max_length=12)


def test_json_schema_output_is_parsed_by_responses_parse(llama_plain, llama_tenant):
    tenant = llama_tenant(llama_plain)
    response = tenant.client.responses.parse(
        model="stories",
        input="Name a pet.",
        temperature=0,
        max_output_tokens=80,
        text_format=Pet,
    )
    assert response.status == "completed"
    pet = response.output_parsed
    assert isinstance(pet, Pet) and 0 < len(pet.name) <= 12


@pytest.mark.parametrize("stream", [False, True])
def test_an_input_over_the_context_is_context_length_exceeded(llama_small, llama_tenant, stream):
    tenant = llama_tenant(llama_small)
    with pytest.raises(APIStatusError) as error:
        tenant.client.responses.create(
            model="stories", input=LONG_INPUT, max_output_tokens=16, stream=stream
        )
    assert error.value.status_code == 400
    assert error.value.body["code"] == "context_length_exceeded"
    assert error.value.body["param"] == "input"
    # The server's own words stay with support: a backend is no trusted voice.
    assert "exceeds the available context size" not in error.value.body["message"]
    row = wait_rows(organisation=tenant.organisation)[0]
    assert row.status == 400 and row.error_code == "context_length_exceeded"
    assert "exceeds the available context size" in row.error_message


def test_closing_a_stream_cancels_the_servers_task_and_logs_499(llama_plain, llama_tenant):
    # A backend that never stops early: EOS banned, so the story runs to the
    # context size (about 2,000 tokens) unless the request is cancelled.
    tenant = llama_tenant(
        llama_plain, backend_name="llama-endless", extra_body={"logit_bias": {"2": -100}}
    )
    before = len(re.findall(r"cancel task, id_task = \d+", llama_plain.output()))
    stream = tenant.client.responses.create(
        model="stories", input=PROMPT, temperature=0, max_output_tokens=1900, stream=True
    )
    deltas = 0
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas += 1
            if deltas == 5:
                break
    stream.close()
    wait_for(
        lambda: len(re.findall(r"cancel task, id_task = \d+", llama_plain.output())) > before,
        timeout=15,
    )
    row = wait_rows(organisation=tenant.organisation, status=499)[0]
    assert row.note == "Client disconnected" and row.stream
    assert row.backend_name == "llama-endless"
