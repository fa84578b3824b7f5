"""What a conversation keeps and for how long: sealed at rest, gone after
the organisation's TTL, never kept by a zero-data-retention organisation,
and malformed requests refused with the OpenAI error envelope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from openai import BadRequestError, NotFoundError

from accounts.audit import CLI
from accounts.services.organisations import organisation_settings_update
from responses_api.models import Conversation, ConversationItem
from responses_api.store import conversations as store
from responses_api.tasks import purge_stored_responses
from tests.conftest import wait_rows

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_metadata_and_items_are_sealed_at_rest(client):
    conversation = client.conversations.create(
        metadata={"project": "moonshot-alpha"},
        items=[{"role": "user", "content": "the launch code is 0000-SECRET"}],
    )
    client.responses.create(
        model="sim-model", input="[[text:keep it quiet]] ok?", conversation=conversation.id
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {Conversation._meta.db_table}")
        conversations = repr(cursor.fetchall())
        cursor.execute(f"SELECT * FROM {ConversationItem._meta.db_table}")
        items = repr(cursor.fetchall())
    assert conversation.id in conversations
    for plain in ("moonshot", "project", "SECRET", "launch", "keep it quiet", "input_text"):
        assert plain not in conversations and plain not in items
    assert ConversationItem.objects.count() == 3
    assert all(
        data.startswith("gAAAA") for data in ConversationItem.objects.values_list("data", flat=True)
    )
    # Read back through the API, all of it is there.
    listed = list(client.conversations.items.list(conversation.id, order="asc"))
    assert listed[0].content[0].text == "the launch code is 0000-SECRET"
    assert listed[2].content[0].text == "keep it quiet"


@pytest.mark.django_db
def test_a_conversation_lives_its_ttl_after_its_last_use_then_is_purged(people):
    acme = people["acme"]
    with time_machine.travel(T0, tick=False) as clock:
        made = store.conversation_create(
            organisation_id=acme.id,
            ttl_hours=24,
            metadata={"a": "b"},
            items=[{"role": "user", "content": "hi"}],
        )
        idle = store.conversation_create(
            organisation_id=acme.id, ttl_hours=24, metadata=None, items=[]
        )
        cid = made["id"]
        clock.shift(timedelta(hours=20))
        # A use: a response created in it (its history read) renews the TTL.
        assert len(store.history(organisation_id=acme.id, ttl_hours=24, conversation_id=cid)) == 1
        clock.shift(timedelta(hours=5))  # 25 h after creation, 5 h after its last use
        assert store.conversation_get(organisation_id=acme.id, conversation_id=cid)["id"] == cid
        with pytest.raises(store.Missing):
            store.conversation_get(organisation_id=acme.id, conversation_id=idle["id"])
        assert store.conversations_summary(organisation_id=acme.id) == (1, 1)
        assert purge_stored_responses() == 1
        assert list(Conversation.objects.values_list("id", flat=True)) == [cid]
        clock.shift(timedelta(hours=19, minutes=1))  # 24 h and a minute after its last use
        for read in (
            lambda: store.conversation_get(organisation_id=acme.id, conversation_id=cid),
            lambda: store.items_list(
                organisation_id=acme.id, conversation_id=cid, after=None, limit=20, order="asc"
            ),
            lambda: store.items_add(
                organisation_id=acme.id, ttl_hours=24, conversation_id=cid, items=[]
            ),
            lambda: store.history(organisation_id=acme.id, ttl_hours=24, conversation_id=cid),
        ):
            with pytest.raises(store.Missing):
                read()
        assert store.conversations_summary(organisation_id=acme.id) == (0, 0)
        assert Conversation.objects.count() == 1  # still there, unreadable
        assert store.conversations_purge(batch=1) == 1
    assert not Conversation.objects.exists() and not ConversationItem.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_zero_retention_organisation_has_no_conversations(gateway, initech, acme, client):
    theirs = client.conversations.create()
    zdr = gateway.openai(initech.key)
    with pytest.raises(BadRequestError) as caught:
        zdr.conversations.create()
    assert caught.value.body["code"] == "conversations_not_stored"
    assert "zero data retention" in caught.value.body["message"]
    with pytest.raises(BadRequestError) as caught:
        zdr.responses.create(model="sim-model", input="x", conversation=theirs.id)
    assert caught.value.body["param"] == "conversation"
    assert caught.value.body["code"] == "conversations_not_stored"
    for call in (
        lambda: zdr.conversations.retrieve(theirs.id),
        lambda: zdr.conversations.update(theirs.id, metadata={}),
        lambda: zdr.conversations.delete(theirs.id),
        lambda: zdr.conversations.items.list(theirs.id),
        lambda: zdr.conversations.items.create(theirs.id, items=[{"role": "user", "content": "x"}]),
        lambda: zdr.conversations.items.retrieve("msg_1", conversation_id=theirs.id),
        lambda: zdr.conversations.items.delete("msg_1", conversation_id=theirs.id),
    ):
        with pytest.raises(NotFoundError) as caught:
            call()
        assert caught.value.body["code"] == "conversation_not_found"
    assert not Conversation.objects.filter(organisation=initech.organisation).exists()
    # Each refused call still left its usage row.
    rows = wait_rows(9, organisation=initech.organisation)
    assert [r.status for r in rows] == [400, 400, *[404] * 7]


@pytest.mark.django_db(transaction=True)
def test_turning_retention_to_none_deletes_the_conversations(client, acme):
    conversation = client.conversations.create(items=[{"role": "user", "content": "x"}])
    assert Conversation.objects.filter(id=conversation.id).exists()
    organisation_settings_update(
        organisation=acme.organisation, actor=CLI, data={"retention_policy": "none"}
    )
    assert not Conversation.objects.exists() and not ConversationItem.objects.exists()


MALFORMED = [
    ("post", "/v1/conversations", b"{not json", 400, None),
    ("post", "/v1/conversations", b"[1, 2]", 400, None),
    ("post", "/v1/conversations", b'{"metadata": {"k": 5}}', 400, "metadata.k"),
    ("post", "/v1/conversations", b'{"items": "hello"}', 400, "items"),
    ("post", "/v1/conversations", b'{"bogus": 1}', 400, "bogus"),
    ("post", "/v1/conversations", b'{"metadata": {"x": "' + b"y" * 513 + b'"}}', 400, "metadata"),
    (
        "post",
        "/v1/conversations",
        b'{"items": [' + b",".join([b'{"role": "user", "content": "x"}'] * 21) + b"]}",
        400,
        "items",
    ),
    ("post", "{conv}/items", b'{"items": []}', 400, "items"),
    ("post", "{conv}/items", b'{"items": [{"type": "mystery"}]}', 400, "items[0].type"),
    ("post", "{conv}/items", b'{"items": [{"type": "item_reference", "id": "m"}]}', 400, "items"),
    (
        "post",
        "{conv}/items?include=nope",
        b'{"items": [{"role": "user", "content": "x"}]}',
        400,
        "include",
    ),
    ("post", "{conv}", b"{}", 400, "metadata"),
    ("get", "{conv}/items?limit=0", b"", 400, "limit"),
    ("get", "{conv}/items?limit=abc", b"", 400, "limit"),
    ("get", "{conv}/items?order=sideways", b"", 400, "order"),
    ("get", "{conv}/items?after=msg_unknown", b"", 400, "after"),
    ("put", "{conv}", b"{}", 405, None),
    ("get", "/v1/conversations/conv_%00x", b"", 404, None),
    (
        "post",
        "/v1/conversations",
        b'{"items": [{"type": "web_search_call", "id": "ws_1", "action": '
        + b"[" * 300
        + b"]" * 300
        + b"}]}",
        400,
        "items",
    ),
    ("post", "{conv}/items", b'{"items": ' + b"[" * 2000 + b"]" * 2000 + b"}", 400, None),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("method", "path", "body", "status", "param"), MALFORMED)
def test_malformed_requests_get_the_error_envelope(
    client, gateway, acme, method, path, body, status, param
):
    conversation = client.conversations.create()
    url = path.replace("{conv}", f"/v1/conversations/{conversation.id}")
    headers = {"authorization": f"Bearer {acme.key}", "content-type": "application/json"}
    reply = gateway.http.request(method.upper(), url, content=body, headers=headers)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if param is not None:
        assert error["param"] == param, error
    assert reply.headers["x-request-id"]


@pytest.mark.django_db(transaction=True)
def test_a_body_that_is_not_json_is_a_415(client, gateway, acme):
    headers = {"authorization": f"Bearer {acme.key}", "content-type": "text/plain"}
    reply = gateway.http.post("/v1/conversations", content=b"{}", headers=headers)
    assert reply.status_code == 415 and reply.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.django_db(transaction=True)
def test_a_nul_in_an_id_is_never_a_500(client, gateway, acme):
    conversation = client.conversations.create(
        items=[{"role": "user", "content": "x", "id": "msg_\x00nul"}]
    )
    (item,) = client.conversations.items.list(conversation.id).data
    assert item.id == "msg_\x00nul"
    headers = {"authorization": f"Bearer {acme.key}"}
    base = f"/v1/conversations/{conversation.id}"
    for reply in (
        gateway.http.get(f"{base}/items/msg_%00nul", headers=headers),
        gateway.http.delete(f"{base}/items/msg_%00nul", headers=headers),
        gateway.http.get("/v1/conversations/conv_%00x/items", headers=headers),
    ):
        assert reply.status_code == 404, reply.text
    answer = gateway.http.post(
        "/v1/responses",
        headers=headers,
        json={"model": "sim-model", "input": "x", "conversation": "conv_\x00x"},
    )
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "conversation_not_found"
