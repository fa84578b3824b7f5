"""GET and DELETE /v1/responses/{id} and its input items, through the SDK."""

from __future__ import annotations

import json

import pytest
from openai import BadRequestError, NotFoundError

from tests.conftest import wait_rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_retrieve_returns_the_response_as_it_was_answered(client):
    created = client.responses.with_raw_response.create(model="sim-model", input="[[text:hi]]")
    stored = client.responses.with_raw_response.retrieve(created.parse().id)
    assert json.loads(stored.content) == json.loads(created.content)


@pytest.mark.parametrize("prefix", ["/v1", "/api/v1"])
def test_delete_answers_as_openai_does_and_the_response_is_gone(client, gateway, acme, prefix):
    response = client.responses.create(model="sim-model", input="[[text:bye]]")
    headers = {"authorization": f"Bearer {acme.key}"}
    url = f"{prefix}/responses/{response.id}"
    http = gateway.http
    assert http.get(url, headers=headers).json()["id"] == response.id
    answer = http.delete(url, headers=headers)
    assert answer.status_code == 200
    assert answer.json() == {"id": response.id, "object": "response", "deleted": True}
    assert http.get(url, headers=headers).status_code == 404
    assert http.delete(url, headers=headers).status_code == 404
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(model="sim-model", input="x", previous_response_id=response.id)
    assert caught.value.body["code"] == "previous_response_not_found"


def test_deleting_an_earlier_response_ends_the_chains_through_it(client):
    first = client.responses.create(model="sim-model", input="one")
    second = client.responses.create(model="sim-model", input="two", previous_response_id=first.id)
    client.responses.delete(first.id)
    assert client.responses.retrieve(second.id).id == second.id
    with pytest.raises(BadRequestError):
        client.responses.create(model="sim-model", input="3", previous_response_id=second.id)


def test_input_items_are_listed_with_ids_and_paginated(client):
    given = [{"type": "message", "role": "user", "content": f"item {i}"} for i in range(45)]
    given[3]["id"] = "msg_client_own"
    given.append({"type": "function_call_output", "call_id": "c1", "output": "out"})
    response = client.responses.create(model="sim-model", input=given)

    listed = list(client.responses.input_items.list(response.id))
    assert len(listed) == 46
    assert listed[0].type == "function_call_output" and listed[0].id.startswith("fco_")
    assert [item.content[0].text for item in listed[1:]] == [f"item {i}" for i in range(44, -1, -1)]
    assert all(item.id.startswith("msg_") for item in listed[1:])
    assert listed[-4].id == "msg_client_own"

    page = client.responses.input_items.list(response.id, limit=10, order="asc")
    assert [item.content[0].text for item in page.data] == [f"item {i}" for i in range(10)]
    assert page.has_more and page.first_id == page.data[0].id and page.last_id == page.data[-1].id
    ascending = list(client.responses.input_items.list(response.id, limit=7, order="asc"))
    assert [item.id for item in ascending] == [item.id for item in reversed(listed)]
    # Ids are minted once: listing again gives the same ones.
    assert [i.id for i in client.responses.input_items.list(response.id)] == [i.id for i in listed]


def test_a_string_input_is_listed_as_one_user_message(client):
    response = client.responses.create(model="sim-model", input="plain")
    (item,) = client.responses.input_items.list(response.id).data
    assert item.type == "message" and item.role == "user" and item.status == "completed"
    assert item.content[0].type == "input_text" and item.content[0].text == "plain"


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=%C2%B2", "limit"),  # SUPERSCRIPT TWO: a digit to str.isdigit, not to int()
        ("limit=%D9%A3", "limit"),  # ARABIC-INDIC DIGIT THREE
        ("limit=" + "1" * 5000, "limit"),  # past int()'s own digit limit
        ("order=up", "order"),
    ],
)
def test_bad_list_parameters_are_a_400_naming_them(client, gateway, acme, query, param):
    response = client.responses.create(model="sim-model", input="x")
    answer = gateway.http.get(
        f"/v1/responses/{response.id}/input_items?{query}",
        headers={"authorization": f"Bearer {acme.key}"},
    )
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param


def test_stream_replay_is_refused_for_a_response_not_in_the_background(client, gateway, acme):
    response = client.responses.create(model="sim-model", input="x")
    answer = gateway.http.get(
        f"/v1/responses/{response.id}?stream=true",
        headers={"authorization": f"Bearer {acme.key}"},
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "Only background responses" in error["message"] and error["param"] == "stream"


def test_each_call_leaves_a_usage_row_with_its_method(client):
    response = client.responses.create(model="sim-model", input="x")
    client.responses.retrieve(response.id)
    list(client.responses.input_items.list(response.id))
    client.responses.delete(response.id)
    with pytest.raises(NotFoundError):
        client.responses.retrieve(response.id)
    rows = wait_rows(5)
    assert [(r.method, r.endpoint, r.status) for r in rows] == [
        ("POST", "/responses", 200),
        ("GET", f"/responses/{response.id}", 200),
        ("GET", f"/responses/{response.id}/input_items", 200),
        ("DELETE", f"/responses/{response.id}", 200),
        ("GET", f"/responses/{response.id}", 404),
    ]


def test_item_reference_resolves_any_stored_item(client, recorder):
    first = client.responses.create(
        model="sim-model",
        input=[{"role": "user", "content": "[[text:answer one]] q", "id": "msg_q"}],
    )
    (answer,) = first.output
    second = client.responses.create(
        model="sim-model",
        input=[
            {"type": "item_reference", "id": "msg_q"},
            {"type": "item_reference", "id": answer.id},
            {"role": "user", "content": "[[text:done]]"},
        ],
    )
    assert second.output_text == "done"
    assert [(m["role"], m["content"]) for m in recorder.last_messages()] == [
        ("user", "[[text:answer one]] q"),
        ("assistant", "answer one"),
        ("user", "[[text:done]]"),
    ]
    # Listed as the items they named.
    listed = client.responses.input_items.list(second.id, order="asc").data
    assert [item.id for item in listed[:2]] == ["msg_q", answer.id]


def test_an_unknown_item_reference_is_a_400_naming_the_item(client):
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(
            model="sim-model",
            input=[
                {"role": "user", "content": "a"},
                {"role": "user", "content": "b"},
                {"role": "user", "content": "c"},
                {"type": "item_reference", "id": "msg_nowhere"},
            ],
        )
    assert caught.value.body["param"] == "input[3]"
    assert "msg_nowhere" in caught.value.body["message"]
