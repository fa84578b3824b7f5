"""The Conversations API through the OpenAI SDK: conversations, their
items, and responses created in them (``conversation=``)."""

from __future__ import annotations

import pytest
from openai import BadRequestError, NotFoundError

from tests.conftest import wait_rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_conversation_is_created_retrieved_updated_and_deleted(client):
    created = client.conversations.create(
        metadata={"topic": "demo"},
        items=[{"type": "message", "role": "user", "content": "hello"}],
    )
    assert created.id.startswith("conv_") and created.object == "conversation"
    assert created.metadata == {"topic": "demo"} and created.created_at > 0

    fetched = client.conversations.retrieve(created.id)
    assert fetched.model_dump() == created.model_dump()

    updated = client.conversations.update(created.id, metadata={"topic": "other", "n": "2"})
    assert updated.id == created.id and updated.metadata == {"topic": "other", "n": "2"}
    # Metadata is replaced as a whole.
    replaced = client.conversations.update(created.id, metadata={"only": "this"})
    assert client.conversations.retrieve(created.id).metadata == {"only": "this"}
    assert replaced.created_at == created.created_at

    deleted = client.conversations.delete(created.id)
    assert deleted.model_dump() == {
        "id": created.id,
        "object": "conversation.deleted",
        "deleted": True,
    }
    with pytest.raises(NotFoundError) as caught:
        client.conversations.retrieve(created.id)
    assert caught.value.body["code"] == "conversation_not_found"
    with pytest.raises(NotFoundError):
        client.conversations.items.list(created.id)
    with pytest.raises(NotFoundError):
        client.conversations.delete(created.id)


def test_an_empty_body_creates_an_empty_conversation(client, gateway, acme):
    headers = {"authorization": f"Bearer {acme.key}"}
    answer = gateway.http.post("/v1/conversations", headers=headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"id", "object", "created_at", "metadata"} and body["metadata"] == {}
    assert list(client.conversations.items.list(body["id"])) == []


def test_items_are_added_listed_retrieved_and_deleted(client):
    conversation = client.conversations.create(
        items=[
            {"type": "message", "role": "user", "content": "first"},
            {"type": "message", "role": "assistant", "content": "second", "id": "msg_own"},
        ]
    )
    added = client.conversations.items.create(
        conversation.id,
        items=[
            {"role": "user", "content": [{"type": "input_text", "text": "third"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
    )
    assert added.object == "list" and len(added.data) == 3 and added.has_more is False
    assert added.first_id == added.data[0].id and added.last_id == added.data[-1].id
    assert [item.type for item in added.data] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert added.data[0].id.startswith("msg_") and added.data[1].id.startswith("fc_")

    listed = list(client.conversations.items.list(conversation.id, order="asc"))
    assert [item.id for item in listed][1] == "msg_own"
    assert listed[0].content[0].type == "input_text" and listed[0].content[0].text == "first"
    assert listed[1].role == "assistant" and listed[1].content[0].type == "output_text"
    assert listed[2].content[0].text == "third" and listed[4].output == "ok"
    newest_first = list(client.conversations.items.list(conversation.id))
    assert [i.id for i in newest_first] == [i.id for i in reversed(listed)]

    item = client.conversations.items.retrieve(
        "msg_own", conversation_id=conversation.id, include=["reasoning.encrypted_content"]
    )
    assert item.model_dump() == listed[1].model_dump()

    after = client.conversations.items.delete("msg_own", conversation_id=conversation.id)
    assert after.object == "conversation" and after.id == conversation.id
    with pytest.raises(NotFoundError) as caught:
        client.conversations.items.retrieve("msg_own", conversation_id=conversation.id)
    assert caught.value.body["code"] == "item_not_found"
    with pytest.raises(NotFoundError):
        client.conversations.items.delete("msg_own", conversation_id=conversation.id)
    remaining = [i.id for i in client.conversations.items.list(conversation.id, order="asc")]
    assert remaining == [listed[0].id, *[i.id for i in listed[2:]]]


def test_items_are_paginated_with_after_limit_and_order(client):
    conversation = client.conversations.create()
    for batch in range(3):
        client.conversations.items.create(
            conversation.id,
            items=[{"role": "user", "content": f"item {batch * 20 + i}"} for i in range(20)],
        )
    page = client.conversations.items.list(
        conversation.id, limit=7, order="asc", include=["message.input_image.image_url"]
    )
    assert [i.content[0].text for i in page.data] == [f"item {i}" for i in range(7)]
    assert page.has_more is True and page.last_id == page.data[-1].id
    second = client.conversations.items.list(
        conversation.id, limit=7, order="asc", after=page.last_id
    )
    assert [i.content[0].text for i in second.data] == [f"item {i}" for i in range(7, 14)]
    # The SDK follows the cursor over every page.
    everything = list(client.conversations.items.list(conversation.id, limit=25))
    assert [i.content[0].text for i in everything] == [f"item {i}" for i in range(59, -1, -1)]
    last = client.conversations.items.list(
        conversation.id, limit=100, order="desc", after=everything[-3].id
    )
    assert [i.content[0].text for i in last.data] == ["item 1", "item 0"]
    assert last.has_more is False and last.first_id == last.data[0].id
    default = client.conversations.items.list(conversation.id)
    assert len(default.data) == 20 and default.has_more is True


def test_a_response_in_a_conversation_sees_every_earlier_turn(client, recorder):
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "developer", "content": "Be brief."}]
    )
    first = client.responses.create(
        model="sim-model", input="[[text:Hi Ada.]] My name is Ada.", conversation=conversation.id
    )
    assert first.output_text == "Hi Ada."
    assert first.conversation is not None and first.conversation.id == conversation.id
    second = client.responses.create(
        model="sim-model",
        input=[{"role": "user", "content": "[[text:You are Ada.]] Who am I?"}],
        conversation={"id": conversation.id},
        stream=True,
    )
    events = list(second)
    assert events[-1].type == "response.completed"
    assert events[-1].response.conversation.id == conversation.id
    sent = recorder.last_messages()
    assert [(m["role"], m["content"]) for m in sent] == [
        ("developer" if sent[0]["role"] == "developer" else "system", "Be brief."),
        ("user", "[[text:Hi Ada.]] My name is Ada."),
        ("assistant", "Hi Ada."),
        ("user", "[[text:You are Ada.]] Who am I?"),
    ]
    # Both turns were appended: input then output, each with its id.
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    assert [(i.type, getattr(i, "role", None)) for i in items] == [
        ("message", "developer"),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert items[2].id == first.output[0].id
    assert items[4].id == events[-1].response.output[0].id
    assert items[4].content[0].text == "You are Ada."


def test_a_conversation_with_store_false_still_keeps_its_turns(client):
    conversation = client.conversations.create()
    response = client.responses.create(
        model="sim-model", input="[[text:noted]] x", conversation=conversation.id, store=False
    )
    with pytest.raises(NotFoundError):
        client.responses.retrieve(response.id)
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    assert [i.role for i in items] == ["user", "assistant"]
    assert items[1].content[0].text == "noted"


def test_a_failed_response_adds_nothing_to_its_conversation(client):
    conversation = client.conversations.create()
    stream = client.responses.create(
        model="sim-model",
        input="[[text:one two three four]] [[fail-after:1]] boom",
        conversation=conversation.id,
        stream=True,
    )
    events = list(stream)
    assert events[-1].type == "response.failed"
    assert list(client.conversations.items.list(conversation.id)) == []


def test_conversation_and_previous_response_id_are_mutually_exclusive(client):
    conversation = client.conversations.create()
    first = client.responses.create(model="sim-model", input="x")
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(
            model="sim-model",
            input="y",
            conversation=conversation.id,
            previous_response_id=first.id,
        )
    error = caught.value.body
    assert error["code"] == "mutually_exclusive_parameters" and error["param"] == "conversation"
    assert list(client.conversations.items.list(conversation.id)) == []


def test_an_unknown_conversation_is_a_404_naming_the_parameter(client):
    with pytest.raises(NotFoundError) as caught:
        client.responses.create(model="sim-model", input="x", conversation="conv_nothing")
    assert caught.value.body["code"] == "conversation_not_found"
    assert caught.value.body["param"] == "conversation"


def test_each_call_leaves_one_usage_row(client):
    conversation = client.conversations.create()
    cid = conversation.id
    client.conversations.retrieve(cid)
    client.conversations.update(cid, metadata={"a": "b"})
    added = client.conversations.items.create(cid, items=[{"role": "user", "content": "x"}])
    item_id = added.data[0].id
    client.conversations.items.list(cid)
    client.conversations.items.retrieve(item_id, conversation_id=cid)
    client.conversations.items.delete(item_id, conversation_id=cid)
    client.responses.create(model="sim-model", input="y", conversation=cid)
    client.conversations.delete(cid)
    with pytest.raises(NotFoundError):
        client.conversations.retrieve(cid)
    rows = wait_rows(10)
    assert [(r.method, r.endpoint, r.status) for r in rows] == [
        ("POST", "/conversations", 200),
        ("GET", f"/conversations/{cid}", 200),
        ("POST", f"/conversations/{cid}", 200),
        ("POST", f"/conversations/{cid}/items", 200),
        ("GET", f"/conversations/{cid}/items", 200),
        ("GET", f"/conversations/{cid}/items/{item_id}", 200),
        ("DELETE", f"/conversations/{cid}/items/{item_id}", 200),
        ("POST", "/responses", 200),
        ("DELETE", f"/conversations/{cid}", 200),
        ("GET", f"/conversations/{cid}", 404),
    ]


def test_the_openapi_document_describes_every_conversation_operation():
    from responses_api.edge.openapi import openapi_schema

    document = openapi_schema()
    paths = document["paths"]
    operations = {
        (path, method): op["operationId"]
        for path, methods in paths.items()
        if path.startswith("/conversations")
        for method, op in methods.items()
        if method != "parameters"
    }
    assert operations == {
        ("/conversations", "post"): "createConversation",
        ("/conversations/{conversation_id}", "get"): "getConversation",
        ("/conversations/{conversation_id}", "post"): "updateConversation",
        ("/conversations/{conversation_id}", "delete"): "deleteConversation",
        ("/conversations/{conversation_id}/items", "get"): "listConversationItems",
        ("/conversations/{conversation_id}/items", "post"): "createConversationItems",
        ("/conversations/{conversation_id}/items/{item_id}", "get"): "getConversationItem",
        ("/conversations/{conversation_id}/items/{item_id}", "delete"): "deleteConversationItem",
    }
    schemas = document["components"]["schemas"]
    assert schemas["NewItems"]["properties"]["items"]["maxItems"] == 20
    assert "conversation" in schemas["CreateResponse"]["properties"]
    assert "metadata" in schemas["MetadataUpdate"]["required"]
