"""Another organisation's conversation is indistinguishable from one that
never existed, was deleted or has expired: the same status and the same
bytes on every endpoint that names it, and in ``conversation=``."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from responses_api.models import Conversation, ConversationItem
from tests.inprocess import Gateway

pytestmark = pytest.mark.django_db(transaction=True)


def asks(gateway: Gateway, key: str, conversation_id: str, item_id: str) -> list[httpx.Response]:
    """Every way of naming a conversation or one of its items."""
    base = f"/v1/conversations/{conversation_id}"
    headers = {"authorization": f"Bearer {key}"}
    with httpx.Client(
        transport=gateway.transport, base_url=gateway.url, headers=headers, timeout=30
    ) as http:
        return [
            http.get(base),
            http.post(base, json={"metadata": {"stolen": "yes"}}),
            http.get(f"{base}/items"),
            http.get(f"{base}/items?order=asc&limit=5&after={item_id}"),
            http.post(f"{base}/items", json={"items": [{"role": "user", "content": "in"}]}),
            http.get(f"{base}/items/{item_id}"),
            http.delete(f"{base}/items/{item_id}"),
            http.post(
                "/v1/responses",
                json={"model": "sim-model", "input": "x", "conversation": conversation_id},
            ),
            http.post(
                "/api/v1/responses",
                json={"model": "sim-model", "input": "x", "conversation": {"id": conversation_id}},
            ),
            http.delete(base),
        ]


def _answers(replies: list[httpx.Response]) -> list[tuple[int, bytes, list]]:
    return [
        (r.status_code, r.content, sorted(h for h in r.headers.items() if h[0] != "x-request-id"))
        for r in replies
    ]


def test_another_organisations_conversation_answers_as_a_missing_one(
    gateway, acme, globex, client, recorder
):
    conversation = client.conversations.create(
        metadata={"owner": "acme"},
        items=[{"type": "message", "role": "user", "content": "acme's secret plan", "id": "msg_p"}],
    )
    cid = conversation.id
    sent_before = len(recorder.requests)

    others = _answers(asks(gateway, globex.key, cid, "msg_p"))
    assert [status for status, _, _ in others] == [404] * 10
    assert all(b"conversation_not_found" in body for _, body, _ in others)
    assert all(b"secret" not in body and b"acme" not in body for _, body, _ in others)
    # Nothing of Acme's changed, and no backend was asked.
    assert client.conversations.retrieve(cid).metadata == {"owner": "acme"}
    assert [i.id for i in client.conversations.items.list(cid)] == ["msg_p"]
    assert len(recorder.requests) == sent_before
    assert not Conversation.objects.filter(organisation=globex.organisation).exists()

    # Acme itself, once the conversation has expired (not yet purged) ...
    Conversation.objects.filter(id=cid).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = _answers(asks(gateway, acme.key, cid, "msg_p"))
    # ... and once it is deleted outright.
    Conversation.objects.filter(id=cid).update(expires_at=timezone.now() + timedelta(hours=1))
    client.conversations.delete(cid)
    deleted = _answers(asks(gateway, acme.key, cid, "msg_p"))
    # An id that never existed, from Globex.
    never = _answers(asks(gateway, globex.key, cid, "msg_p"))
    assert others == expired == deleted == never
    assert not ConversationItem.objects.exists()


def test_an_item_id_of_another_organisations_conversation_is_not_found_in_ones_own(
    gateway, acme, globex, client
):
    theirs = gateway.openai(globex.key).conversations.create(
        items=[{"type": "message", "role": "user", "content": "globex only", "id": "msg_g"}]
    )
    mine = client.conversations.create()
    headers = {"authorization": f"Bearer {acme.key}"}
    http = gateway.http
    for reply in (
        http.get(f"/v1/conversations/{mine.id}/items/msg_g", headers=headers),
        http.delete(f"/v1/conversations/{mine.id}/items/msg_g", headers=headers),
    ):
        assert reply.status_code == 404 and reply.json()["error"]["code"] == "item_not_found"
    after = http.get(f"/v1/conversations/{mine.id}/items?after=msg_g", headers=headers)
    assert after.status_code == 400 and after.json()["error"]["param"] == "after"
    assert ConversationItem.objects.filter(conversation_id=theirs.id).count() == 1
