"""``previous_response_id``: the backend gets the whole conversation."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

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


def _roles(messages):
    return [m["role"] for m in messages]


def test_three_turns_with_a_tool_loop_send_the_whole_chain(client, recorder):
    first = client.responses.create(
        model="sim-model", instructions="Be brief.", input="[[text:Hello there]] Hi"
    )
    assert first.output_text == "Hello there" and first.store is True
    assert _roles(recorder.last_messages()) == ["system", "user"]

    second = client.responses.create(
        model="sim-model",
        previous_response_id=first.id,
        input='Weather? [[call:get_weather {"city": "Paris"}]]',
        tools=[WEATHER],
    )
    (call,) = second.output
    assert call.type == "function_call" and second.previous_response_id == first.id
    sent = recorder.last_messages()
    # The first turn's instructions are not carried over.
    assert _roles(sent) == ["user", "assistant", "user"]
    assert sent[0]["content"] == "[[text:Hello there]] Hi"
    assert sent[1]["content"] == "Hello there"

    # The tool's output is the only new input.
    third = client.responses.create(
        model="sim-model",
        previous_response_id=second.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],
        instructions="Answer in French.",
    )
    assert third.output_text == "Tool result: sunny"
    sent = recorder.last_messages()
    assert _roles(sent) == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert sent[0]["content"] == "Answer in French."
    (tool_call,) = sent[4]["tool_calls"]
    assert tool_call["id"] == call.call_id
    assert json.loads(tool_call["function"]["arguments"]) == {"city": "Paris"}
    assert sent[5] == {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"}


def test_reasoning_of_an_earlier_turn_goes_back_to_the_backend(client, recorder):
    first = client.responses.create(model="sim-model", input="[[reason:Think hard]] [[text:ok]]")
    assert first.output[0].type == "reasoning"
    client.responses.create(model="sim-model", previous_response_id=first.id, input="again")
    assistant = recorder.last_messages()[1]
    assert assistant["role"] == "assistant" and assistant["reasoning_content"] == "Think hard"


def test_a_streamed_response_is_stored_and_continued(client, recorder):
    events = list(
        client.responses.create(model="sim-model", input="[[text:streamed words]]", stream=True)
    )
    # Stored as the client got it in the terminal event.
    assert events[-1].type == "response.completed"
    final = events[-1].response
    assert client.responses.retrieve(final.id).model_dump() == final.model_dump()
    with client.responses.stream(
        model="sim-model", previous_response_id=final.id, input="[[text:more]]"
    ) as stream:
        second = stream.get_final_response()
    assert second.output_text == "more"
    assert [m.get("content") for m in recorder.last_messages()] == [
        "[[text:streamed words]]",
        "streamed words",
        "[[text:more]]",
    ]


def test_store_false_keeps_nothing_but_may_continue(client, recorder):
    kept = client.responses.create(model="sim-model", input="[[text:one]]")
    unkept = client.responses.create(
        model="sim-model", input="[[text:two]]", previous_response_id=kept.id, store=False
    )
    assert unkept.store is False and len(recorder.last_messages()) == 3
    from openai import NotFoundError

    with pytest.raises(NotFoundError):
        client.responses.retrieve(unkept.id)
    from openai import BadRequestError

    with pytest.raises(BadRequestError) as caught:
        client.responses.create(model="sim-model", input="x", previous_response_id=unkept.id)
    assert caught.value.body["code"] == "previous_response_not_found"
    assert caught.value.body["param"] == "previous_response_id"


def test_a_chain_stays_on_the_backend_that_served_it(provision, recorder, client, acme):
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    other, _ = backend_ensure(
        organisation=acme.organisation, name="sim2", base_url=recorder.url, dialect="vllm"
    )
    model_ensure(
        organisation=acme.organisation,
        public_id="sim-model",
        backend=other,
        upstream_name="sim-model",
    )
    previous = client.responses.create(model="sim-model", input="[[text:start]]")
    backends = set()
    for turn in range(6):
        reply = client.responses.with_raw_response.create(
            model="sim-model", input=f"turn {turn}", previous_response_id=previous.id
        )
        backends.add(reply.headers["x-backend-id"])
        previous = reply.parse()
    assert len(backends) == 1


def test_a_chain_whose_rows_loop_is_read_as_missing_not_walked_for_ever(client, acme):
    """Rows that name each other as their previous response (nothing a
    client can write: a response's previous one exists before it) end the
    walk along the chain: the chain is missing, as with a row gone."""
    from django.utils import timezone

    from responses_api.models import StoredResponse
    from responses_api.store import responses as store

    first = client.responses.create(model="sim-model", input="one")
    second = client.responses.create(model="sim-model", previous_response_id=first.id, input="two")
    StoredResponse.objects.filter(id=first.id).update(previous_response_id=second.id)
    organisation_id = acme.organisation.pk
    assert store._chain(organisation_id, second.id, timezone.now()) is None
