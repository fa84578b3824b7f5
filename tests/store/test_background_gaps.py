"""Background responses at their edges: a conversation that cannot be
used is the POST's 404, as without background; a response cancelled while
queued has its create request's row although no worker ever took it (and a
worker that takes it later writes none); a response whose process
restarted before it ended is failed with its create request's row."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from responses_api.background import run as background_run
from responses_api.models import StoredResponse
from responses_api.store import events
from tests.conftest import usage_rows, wait_for
from tests.store.test_background import _local_worker, _poll  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_worker(monkeypatch):
    """No worker ever takes a queued response: what was queued, in order."""
    queued: list[tuple[int, str]] = []

    async def dispatch(organisation_id: int, response_id: str) -> None:
        queued.append((organisation_id, response_id))

    monkeypatch.setattr(background_run, "dispatch", dispatch)
    return queued


def _create(gateway, key: str, **body):
    return gateway.http.post(
        "/v1/responses",
        json={"model": "sim-model", "input": "[[tokens:3]] go", **body},
        headers={"authorization": f"Bearer {key}"},
    )


def test_an_unusable_conversation_is_the_posts_404_with_or_without_background(
    gateway, acme, globex, no_worker
):
    theirs = gateway.openai(globex.key).conversations.create(
        items=[{"type": "message", "role": "user", "content": "globex only"}]
    )
    for conversation in ("conv_unknown", theirs.id, {"id": theirs.id}):
        plain = _create(gateway, acme.key, conversation=conversation)
        queued = _create(gateway, acme.key, conversation=conversation, background=True)
        assert plain.status_code == queued.status_code == 404
        assert queued.json() == plain.json()
        assert queued.json()["error"]["code"] == "conversation_not_found"
        assert queued.json()["error"]["param"] == "conversation"
        request_id = queued.headers["x-request-id"]
        rows = wait_for(lambda r=request_id: usage_rows(request_id=r))
        assert [row.status for row in rows] == [404]
    # Nothing was queued nor stored for them.
    assert no_worker == []
    assert not StoredResponse.objects.filter(organisation_id=acme.organisation.pk).exists()
    both = _create(
        gateway, acme.key, conversation=theirs.id, previous_response_id="resp_x", background=True
    )
    assert both.status_code == 400
    assert both.json()["error"]["code"] == "mutually_exclusive_parameters"


def test_a_background_response_in_its_own_conversation_is_added_to_it(client):
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "remember 7"}]
    )
    queued = client.responses.create(
        model="sim-model",
        input="[[text:noted]] go",
        conversation=conversation.id,
        background=True,
    )
    assert queued.status == "queued"
    assert _poll(client, queued.id, "completed").output_text == "noted"
    items = client.conversations.items.list(conversation.id, order="asc")
    assert [item.type for item in items.data] == ["message", "message", "message"]


def test_a_response_cancelled_while_queued_has_its_row_without_any_worker(client, no_worker):
    raw = client.responses.with_raw_response.create(
        model="sim-model", input="[[tokens:3]] go", background=True
    )
    queued = raw.parse()
    ((queued_org, queued_id),) = no_worker
    assert queued_id == queued.id
    assert client.responses.cancel(queued.id).status == "cancelled"
    request_id = raw.headers["x-request-id"]
    rows = wait_for(lambda: usage_rows(request_id=request_id))
    assert [row.status for row in rows] == [499]
    # A worker that takes the job after all runs nothing and writes no row.
    async_to_sync(background_run.run)(queued_org, queued.id)
    assert client.responses.retrieve(queued.id).status == "cancelled"
    assert [row.status for row in usage_rows(request_id=request_id)] == [499]
    # Its stored row keeps no job any more.
    from responses_api.store.background import background_job

    assert background_job(organisation_id=queued_org, response_id=queued.id) is None


def _forget(organisation_id: int, response_id: str) -> None:
    """Lose what a background response shares: a restart of the embedded
    default's process; with Redis, its keys expiring."""
    from django.conf import settings

    if not settings.REDIS_URL:
        events.forget_all()
        return
    import redis

    with redis.Redis.from_url(settings.REDIS_URL) as conn:
        conn.delete(events.state_key(organisation_id, response_id))


def test_a_restart_before_the_end_fails_the_response_with_its_row(client, no_worker):
    raw = client.responses.with_raw_response.create(
        model="sim-model", input="[[tokens:3]] go", background=True
    )
    queued = raw.parse()
    request_id = raw.headers["x-request-id"]
    assert usage_rows(request_id=request_id) == []
    ((organisation_id, _),) = no_worker
    _forget(organisation_id, queued.id)
    failed = client.responses.retrieve(queued.id)
    assert failed.status == "failed"
    assert failed.error is not None and "stopped before it finished" in failed.error.message
    rows = wait_for(lambda: usage_rows(request_id=request_id))
    assert len(rows) == 1 and rows[0].status == 500
    assert rows[0].error_code == "worker_lost"
    # Reading it again writes no second row.
    assert client.responses.retrieve(queued.id).status == "failed"
    assert len(usage_rows(request_id=request_id)) == 1
