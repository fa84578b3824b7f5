"""An item id is kept whole only up to 128 characters: a longer one is
refused where an item is created (a stored response's input, a
conversation's items), with OpenAI's 400 for an over-long string naming
the field, and nothing is stored; one of 128 is found again by its id."""

from __future__ import annotations

import pytest
from openai import BadRequestError

from responses_api.models import Conversation, ConversationItem, StoredResponse
from tests.conftest import usage_rows

pytestmark = pytest.mark.django_db(transaction=True)

LONGEST = "msg_" + "x" * 124
TOO_LONG = "msg_" + "y" * 196


def _message(item_id: str, text: str = "hello") -> dict:
    return {"type": "message", "role": "user", "content": text, "id": item_id}


def _refused(answer, param: str) -> None:
    assert answer.status_code == 400
    assert answer.headers["x-request-id"]
    error = answer.json()["error"]
    assert error == {
        "message": (
            f"Invalid '{param}': string too long. Expected a string with maximum length 128, "
            "but got a string with length 200 instead."
        ),
        "type": "invalid_request_error",
        "param": param,
        "code": "string_above_max_length",
    }


def test_an_over_long_item_id_is_refused_wherever_items_are_created(gateway, acme, client):
    headers = {"authorization": f"Bearer {acme.key}"}
    http = gateway.http
    conversation = client.conversations.create()
    asks = [
        (
            "/v1/conversations",
            {"items": [_message("msg_a"), _message(TOO_LONG)]},
            "items[1].id",
        ),
        (
            f"/v1/conversations/{conversation.id}/items",
            {"items": [_message(TOO_LONG)]},
            "items[0].id",
        ),
        ("/v1/responses", {"model": "sim-model", "input": [_message(TOO_LONG)]}, "input[0].id"),
        (
            "/v1/responses",
            {
                "model": "sim-model",
                "input": [_message("msg_b"), _message(TOO_LONG)],
                "background": True,
            },
            "input[1].id",
        ),
        (
            "/v1/responses",
            {"model": "sim-model", "input": [_message(TOO_LONG)], "conversation": conversation.id},
            "input[0].id",
        ),
    ]
    for path, body, param in asks:
        answer = http.post(path, json=body, headers=headers)
        _refused(answer, param)
        rows = usage_rows(request_id=answer.headers["x-request-id"])
        assert [row.status for row in rows] == [400]
    # Nothing was kept of any of them.
    assert Conversation.objects.count() == 1
    assert ConversationItem.objects.count() == 0
    assert StoredResponse.objects.count() == 0
    # The SDK sees the same 400.
    with pytest.raises(BadRequestError) as raised:
        client.conversations.items.create(conversation.id, items=[_message(TOO_LONG)])
    assert raised.value.body["param"] == "items[0].id"


def test_an_item_id_of_128_characters_is_found_and_deleted_by_it(client):
    conversation = client.conversations.create(items=[_message(LONGEST, "kept")])
    found = client.conversations.items.retrieve(LONGEST, conversation_id=conversation.id)
    assert found.id == LONGEST
    response = client.responses.create(model="sim-model", input=[_message("m" * 128, "ref me")])
    again = client.responses.create(
        model="sim-model", input=[{"type": "item_reference", "id": "m" * 128}]
    )
    assert again.status == "completed" and response.id != again.id
    client.conversations.items.delete(LONGEST, conversation_id=conversation.id)
    assert client.conversations.items.list(conversation.id).data == []


def test_a_zero_retention_organisation_stores_nothing_and_is_not_refused(gateway, initech):
    answer = gateway.openai(initech.key).responses.create(
        model="sim-model", input=[_message(TOO_LONG, "[[text:fine]] go")]
    )
    assert answer.output_text == "fine"
