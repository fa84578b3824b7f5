"""Expiry under a frozen clock, and the purge of what has expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from responses_api.models import StoredItem, StoredResponse
from responses_api.store import responses as store
from responses_api.tasks import purge_stored_responses

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _save(org, response_id: str, previous: store.Stored | None = None, hours: int = 24) -> None:
    store.response_save(
        organisation_id=org.id,
        ttl_hours=hours,
        response={
            "id": response_id,
            "object": "response",
            "output": [{"id": f"msg_{response_id}"}],
        },
        input_items=[{"id": f"in_{response_id}", "type": "message", "role": "user", "content": []}],
        instructions=None,
        previous=previous,
        affinity="",
    )


def _chain(org, response_id: str):
    return store.lookup(
        organisation_id=org.id, ttl_hours=24, previous_response_id=response_id, item_ids=[]
    ).chain


def test_an_expired_response_is_gone_everywhere_before_it_is_purged(people):
    acme = people["acme"]
    with time_machine.travel(T0, tick=False) as clock:
        _save(acme, "resp_a")
        clock.shift(timedelta(hours=23, minutes=59))
        assert store.response_get(organisation_id=acme.id, response_id="resp_a") is not None
        assert store.responses_summary(organisation_id=acme.id)[0] == 1
        clock.shift(timedelta(minutes=2))
        assert store.response_get(organisation_id=acme.id, response_id="resp_a") is None
        assert _chain(acme, "resp_a") is None
        found = store.lookup(
            organisation_id=acme.id,
            ttl_hours=24,
            previous_response_id=None,
            item_ids=["msg_resp_a"],
        )
        assert found.items == {}
        assert not store.response_delete(organisation_id=acme.id, response_id="resp_a")
        assert store.responses_summary(organisation_id=acme.id) == (0, 0)
        assert StoredResponse.objects.count() == 1  # still there, unreadable
        assert purge_stored_responses() == 1
        assert not StoredResponse.objects.exists() and not StoredItem.objects.exists()


def test_continuing_a_chain_keeps_all_of_it_alive(people):
    acme = people["acme"]
    with time_machine.travel(T0, tick=False) as clock:
        _save(acme, "resp_a")
        clock.shift(timedelta(hours=20))
        (first,) = _chain(acme, "resp_a")
        _save(acme, "resp_b", previous=first)
        clock.shift(timedelta(hours=20))  # 40 h after resp_a was made, 20 h after its last use
        chain = _chain(acme, "resp_b")
        assert [s.id for s in chain] == ["resp_a", "resp_b"]
        clock.shift(timedelta(hours=23))
        assert [s.id for s in _chain(acme, "resp_b")] == ["resp_a", "resp_b"]
        clock.shift(timedelta(hours=25))
        assert _chain(acme, "resp_b") is None
        assert purge_stored_responses() == 2


def test_the_purge_goes_in_batches_and_leaves_live_rows(people):
    acme = people["acme"]
    with time_machine.travel(T0, tick=False) as clock:
        for n in range(7):
            _save(acme, f"resp_old{n}", hours=1)
        _save(acme, "resp_live", hours=48)
        clock.shift(timedelta(hours=2))
        assert store.responses_purge(batch=3) == 7
    assert list(StoredResponse.objects.values_list("id", flat=True)) == ["resp_live"]
    assert list(StoredItem.objects.values_list("item_id", flat=True).order_by("item_id")) == [
        "in_resp_live",
        "msg_resp_live",
    ]


def test_the_purge_is_on_the_beat_schedule_and_the_embedded_timer():
    from django.conf import settings

    from responses_api.management.commands.run_embedded import EMBEDDED_JOBS

    entry = settings.CELERY_BEAT_SCHEDULE["stored-responses-purge"]
    assert entry["task"] == "responses_api.tasks.purge_stored_responses"
    assert "stored-responses-purge" in EMBEDDED_JOBS


def test_content_is_encrypted_at_rest_and_usage_rows_hold_none(people):
    acme = people["acme"]
    store.response_save(
        organisation_id=acme.id,
        ttl_hours=1,
        response={"id": "resp_x", "output": [], "instructions": "very secret instructions"},
        input_items=[{"id": "msg_1", "content": "a secret question"}],
        instructions="very secret instructions",
        previous=None,
        affinity="",
    )
    row = StoredResponse.objects.get()
    assert "secret" not in row.data and row.data.startswith("gAAAA")
    assert row.size == len(row.data)
