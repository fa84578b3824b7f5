"""Usage rows are never lost (the guarantee in ``responses_api/usage/writer.py``):
rows sit in a Redis stream until committed; a writer that crashes before
acknowledging leaves them for another; a poison row holds nobody back; a
web process killed right after answering has already handed its row over."""

from __future__ import annotations

import os
import signal
import time
import uuid
from decimal import Decimal

import httpx
import orjson
import pytest

from responses_api.usage import insert as usage_insert
from responses_api.usage import writer as usage
from tests.conftest import server_env, start_daphne, usage_rows

needs_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="the usage stream lives in Redis: set REDIS_URL (CI does)",
)


def a_row(organisation_id: int, **fields) -> dict:
    now = time.time()
    return {
        "request_id": str(uuid.uuid4()),
        "organisation_id": organisation_id,
        "api_key_id": None,
        "key_prefix": "sy_sk_test",
        "model": "sim-model",
        "endpoint": "/responses",
        "status": 200,
        "output_tokens": 7,
        "created_at": now,
        "finished_at": now,
        **fields,
    }


def xadd(client, row: dict | bytes) -> None:
    raw = row if isinstance(row, bytes) else usage.encode_row(row)
    client.xadd(usage.stream(), {"r": raw})


@pytest.mark.django_db(transaction=True)
def test_write_rows_is_idempotent_and_returns_poison_rows(people):
    org = people["acme"].id
    good = a_row(org)
    orphan = a_row(999_999)  # its organisation does not exist
    assert usage.write_rows([good, orphan, good]) == [orphan]
    assert usage.write_rows([good]) == []
    assert [str(r.request_id) for r in usage_rows()] == [good["request_id"]]


@pytest.mark.django_db(transaction=True)
def test_a_row_reads_back_as_the_orm_would_have_stored_it(people):
    """The writer's own conversions (``usage_insert._converter``) store each
    column's value exactly as ``UsageLog.objects.create`` does."""
    from responses_api.models import UsageLog

    org = people["acme"].id
    fields = {
        "stream": True,
        "status": 499,
        "error_code": "client_disconnected",
        "error_message": "naïve → ünïcode",
        "notices": ["store_ignored"],
        "input_tokens": 12,
        "cached_tokens": 3,
        "reasoning_tokens": 2,
        "cost": "0.00001234",
        "attempts": 2,
        "queue_wait_ms": 1.5,
        "ttft_ms": None,
        "duration_ms": 12.25,
        "tokens_per_second": 42.0,
        "client_ip": "::1",
        "user_agent": "bench/1",
    }
    written = a_row(org, **fields)
    assert usage.write_rows([written]) == []
    by_orm = a_row(org, **fields)
    UsageLog.objects.create(
        **{
            **usage_insert.prepared_row(by_orm),
            "organisation_id": org,
            "cost": Decimal(by_orm["cost"]),
        }
    )
    rows = {str(r.request_id): r for r in UsageLog.objects.all()}
    ours, theirs = rows[written["request_id"]], rows[by_orm["request_id"]]
    for field in UsageLog._meta.concrete_fields:
        if field.attname not in ("id", "request_id"):
            mine, orm = getattr(ours, field.attname), getattr(theirs, field.attname)
            if field.attname in ("created_at", "finished_at"):
                assert abs((mine - orm).total_seconds()) < 60, field.attname
            else:
                assert mine == orm, field.attname


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_rows_read_by_a_writer_that_crashed_are_claimed_by_another(people, redis_stream):
    rows = [a_row(people["acme"].id) for _ in range(3)]
    for row in rows:
        xadd(redis_stream, row)
    usage._ensure_group(redis_stream)
    # A writer reads the entries, then dies before writing or acknowledging.
    taken = redis_stream.xreadgroup(usage.GROUP, "crashed", {usage.stream(): ">"}, count=10)
    assert len(taken[0][1]) == 3
    assert usage.drain_redis(redis_stream, consumer="healthy") == 0  # not idle long enough yet
    assert usage_rows() == []
    assert usage.drain_redis(redis_stream, consumer="healthy", claim_idle_ms=0) == 3
    assert sorted(str(r.request_id) for r in usage_rows()) == sorted(r["request_id"] for r in rows)
    assert redis_stream.xpending(usage.stream(), usage.GROUP)["pending"] == 0


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_a_poison_row_does_not_block_the_others(people, redis_stream):
    """Rows the database refuses become dead letters in the table; a value
    out of range for its column is repaired, not refused."""
    from responses_api.models import UsageDeadLetter

    org = people["acme"].id
    first, last = a_row(org), a_row(org)
    orphan = a_row(999_999)  # foreign key that does not exist
    out_of_range = a_row(org, status=70_000)
    xadd(redis_stream, first)
    xadd(redis_stream, b"{not json")
    xadd(redis_stream, orphan)
    xadd(redis_stream, out_of_range)
    xadd(redis_stream, last)
    assert usage.drain_redis(redis_stream, consumer="w1") == 5
    written = {str(r.request_id): r for r in usage_rows()}
    assert sorted(written) == sorted(
        [first["request_id"], out_of_range["request_id"], last["request_id"]]
    )
    assert written[out_of_range["request_id"]].status == 32767
    assert redis_stream.xpending(usage.stream(), usage.GROUP)["pending"] == 0
    assert sorted(UsageDeadLetter.objects.values_list("request_id", flat=True)) == sorted(
        ["", orphan["request_id"]]
    )
    assert redis_stream.xlen(usage.dead_letter_stream()) == 0
    assert usage.drain_redis(redis_stream, consumer="w2", claim_idle_ms=0) == 0


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_the_same_entry_written_twice_is_one_row(people, redis_stream):
    row = a_row(people["acme"].id)
    xadd(redis_stream, row)
    xadd(redis_stream, row)
    assert usage.drain_redis(redis_stream, consumer="w") == 2
    assert len(usage_rows()) == 1


@pytest.mark.live
@needs_redis
@pytest.mark.django_db(transaction=True)
def test_a_web_process_killed_right_after_answering_loses_no_row(
    provision, simulator, redis_stream
):
    tenant = provision("acme", simulator.url)
    # This web process only queues rows; writing them is left to the workers,
    # so the row can only survive the kill through Redis.
    web = start_daphne(
        server_env(SWITCHYARD_USAGE_STREAM=usage.stream(), SWITCHYARD_USAGE_DRAIN_IN_WEB="false")
    )
    try:
        response = httpx.post(
            web.url + "/v1/responses",
            headers={"authorization": f"Bearer {tenant.key}"},
            json={"model": "sim-model", "input": "hi [[tokens:9]]"},
            timeout=30,
        )
        web.process.send_signal(signal.SIGKILL)
        web.process.wait(10)
    finally:
        web.stop()
    assert response.status_code == 200
    assert usage_rows() == []
    entries = redis_stream.xrange(usage.stream())
    assert len(entries) == 1
    assert orjson.loads(entries[0][1][b"r"])["request_id"] == response.headers["x-request-id"]
    assert usage.drain_redis(redis_stream, consumer="worker") == 1
    row = usage_rows()[0]
    assert str(row.request_id) == response.headers["x-request-id"]
    assert row.status == 200 and row.output_tokens == 9


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_one_drain_takes_a_bounded_number_of_batches(people, redis_stream, monkeypatch):
    """Rows arriving as fast as they are written never hold a drain for
    ever: it returns after ``DRAIN_BATCHES`` batches, the rest for the next."""
    monkeypatch.setattr(usage, "BATCH", 2)
    monkeypatch.setattr(usage, "DRAIN_BATCHES", 3)
    monkeypatch.setattr(usage, "_redis_sync", redis_stream)
    for _ in range(10):
        xadd(redis_stream, a_row(people["acme"].id))
    assert usage.drain_once() == 6
    assert redis_stream.xlen(usage.stream()) == 4
    assert usage.drain_once() == 4
    assert len(usage_rows()) == 10
