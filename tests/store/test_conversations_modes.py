"""A conversation is continued the same way in the other modes of
``POST /v1/responses``: a background response adds its turn when it ends
on the worker, and turns over a WebSocket add theirs as over HTTP."""

from __future__ import annotations

import pytest
from openai import OpenAI

from tests.store.test_background import _local_worker, _poll  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

BETA = {"OpenAI-Beta": "responses_websockets=2026-02-06"}


def test_a_background_response_adds_its_turn_when_it_ends(client, recorder):
    conversation = client.conversations.create(
        items=[{"role": "user", "content": "My name is Cy."}]
    )
    queued = client.responses.create(
        model="sim-model",
        input="[[text:Hello Cy.]] Hi",
        conversation=conversation.id,
        background=True,
    )
    assert queued.status == "queued" and queued.conversation.id == conversation.id
    done = _poll(client, queued.id, "completed", "failed")
    assert done.status == "completed" and done.output_text == "Hello Cy."
    assert [m["content"] for m in recorder.last_messages()] == [
        "My name is Cy.",
        "[[text:Hello Cy.]] Hi",
    ]
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    assert [(i.role, i.content[0].text) for i in items] == [
        ("user", "My name is Cy."),
        ("user", "[[text:Hello Cy.]] Hi"),
        ("assistant", "Hello Cy."),
    ]


@pytest.mark.live
@pytest.mark.timeout(120)
def test_turns_over_a_websocket_continue_the_conversation(api_server, acme, recorder):
    client = OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
    conversation = client.conversations.create()
    with client.responses.connect(extra_headers=BETA) as connection:
        for text in ("[[text:one]] first", "[[text:two]] second"):
            connection.response.create(model="sim-model", input=text, conversation=conversation.id)
            for event in connection:
                if event.type in ("response.completed", "response.failed", "error"):
                    break
            assert event.type == "response.completed", event
            assert event.response.conversation.id == conversation.id
    assert [m["content"] for m in recorder.last_messages()] == [
        "[[text:one]] first",
        "one",
        "[[text:two]] second",
    ]
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    assert [i.content[0].text for i in items] == [
        "[[text:one]] first",
        "one",
        "[[text:two]] second",
        "two",
    ]
