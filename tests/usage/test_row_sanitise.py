"""Every value of a usage row is made to fit its column before the insert
(``responses_api/usage/sanitise.py``), on SQLite and PostgreSQL alike: a
hostile header, path or backend count costs no row."""

from __future__ import annotations

import asyncio
import math
import os
import uuid
from decimal import Decimal

import orjson
import pytest
from django.db import OperationalError, models

from responses_api.models import UsageDeadLetter, UsageLog
from responses_api.usage import insert as usage_insert
from responses_api.usage import writer as usage
from responses_api.usage.sink import UsageSink
from tests.conftest import usage_rows
from tests.usage.test_durability import a_row, xadd

pytestmark = pytest.mark.django_db(transaction=True)

needs_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="the usage stream lives in Redis: set REDIS_URL (CI does)",
)

TEXT_FIELDS = [
    f
    for f in UsageLog._meta.concrete_fields
    if isinstance(f, models.CharField | models.TextField) and not f.is_relation
]


def written(row: dict) -> UsageLog:
    return UsageLog.objects.get(request_id=row["request_id"])


def test_every_text_column_is_covered():
    """The rules come from the model: a new text column is covered too."""
    names = {f.attname for f in TEXT_FIELDS}
    assert {"model", "session_id", "user_agent", "endpoint", "error_message"} <= names
    assert set(usage_insert.RowSanitiser(UsageLog).fixes) >= names


def test_a_nul_in_any_text_column_is_replaced_and_the_row_written(people):
    rows = {}
    for field in TEXT_FIELDS:
        limit = field.max_length or 5000
        rows[field.attname] = a_row(people["acme"].id, **{field.attname: "a\x00b" + "x" * limit})
    assert usage.write_rows(list(rows.values())) == []
    assert UsageDeadLetter.objects.count() == 0
    for name, row in rows.items():
        field = UsageLog._meta.get_field(name)
        value = getattr(written(row), name)
        assert "\x00" not in value, name
        assert value.startswith("a\ufffdb"), name
        assert len(value) == (field.max_length or len(row[name])), name


def test_counts_out_of_range_are_clamped_to_the_column(people):
    row = a_row(
        people["acme"].id,
        input_tokens=-5,
        cached_tokens=2**31 + 7,
        output_tokens=2**70,
        reasoning_tokens="12",
        attempts=-1,
        status=70_000,
    )
    assert usage.write_rows([row]) == []
    stored = written(row)
    assert (stored.input_tokens, stored.cached_tokens, stored.output_tokens) == (
        0,
        2**31 - 1,
        2**31 - 1,
    )
    assert (stored.reasoning_tokens, stored.attempts, stored.status) == (12, 0, 32767)
    assert UsageDeadLetter.objects.count() == 0


def test_nan_and_infinite_floats_and_costs_are_made_storable(people):
    row = a_row(
        people["acme"].id,
        queue_wait_ms=math.nan,
        ttft_ms=math.inf,
        duration_ms=-math.inf,
        tokens_per_second=12.5,
        cost=Decimal("NaN"),
    )
    huge = a_row(people["acme"].id, cost=Decimal("1e12"), ttft_ms="7.5")
    assert usage.write_rows([row, huge]) == []
    stored = written(row)
    assert (stored.queue_wait_ms, stored.ttft_ms, stored.duration_ms) == (None, None, None)
    assert stored.tokens_per_second == 12.5 and stored.cost == 0
    assert written(huge).cost == Decimal("999999.99999999")
    assert written(huge).ttft_ms == 7.5


def test_odd_values_of_other_columns_are_repaired(people):
    row = a_row(
        people["acme"].id,
        client_ip="10.0.0.1\x00",
        notices=["budget_near_limit", "a\x00b", math.nan],
        created_at=math.nan,
        finished_at="not a time",
        api_key_id="not-a-uuid",
        stream="yes",
    )
    assert usage.write_rows([row]) == []
    stored = written(row)
    assert stored.client_ip is None
    assert stored.notices == ["budget_near_limit", "a\ufffdb", None]
    assert stored.created_at is not None and stored.finished_at is None
    assert stored.api_key_id is None and stored.stream is True


def test_a_request_id_that_is_no_uuid_still_makes_one_row(people):
    row = a_row(people["acme"].id, request_id="req\x00-1")
    assert usage.write_rows([row]) == []
    assert usage.write_rows([dict(row)]) == []
    assert len(usage_rows()) == 1


def test_a_row_json_cannot_carry_is_still_encoded():
    """The Redis path: ``encode_row`` never fails on a value of a request."""
    row = a_row(1, session_id="\ud800lone", output_tokens=2**70)
    decoded = orjson.loads(usage.encode_row(row))
    assert decoded["output_tokens"] == 2**63 - 1
    assert "\ud800" not in decoded["session_id"]


def test_without_sanitising_the_database_refusal_is_classified(people, monkeypatch):
    """SQLite's own errors (its statement bypasses Django's cursor) are
    Django's row errors: the batch goes row by row, the refused row becomes
    a dead letter, the others are written, and the writer goes on."""
    monkeypatch.setattr(usage_insert, "_prepare", usage_insert._Prepare())
    monkeypatch.setitem(usage_insert._prepare.sanitise.fixes, "input_tokens", lambda value: value)
    good, bad = a_row(people["acme"].id), a_row(people["acme"].id, input_tokens=-5)
    assert usage.write_rows([good, bad]) == [bad]
    assert [str(r.request_id) for r in usage_rows()] == [good["request_id"]]
    letter = UsageDeadLetter.objects.get()
    assert letter.request_id == bad["request_id"] and letter.error.startswith("IntegrityError")
    later = a_row(people["acme"].id)
    assert usage.write_rows([later]) == []
    assert len(usage_rows()) == 2


def test_the_embedded_writer_keeps_rows_while_the_database_is_down(people, monkeypatch, settings):
    settings.REDIS_URL = ""
    sink = UsageSink()
    rows = [a_row(people["acme"].id, input_tokens=-1) for _ in range(3)]
    sink.pending.extend(rows)

    def down(_rows):
        raise OperationalError("database is locked")

    monkeypatch.setattr(usage, "_commit", down)
    with pytest.raises(OperationalError):
        asyncio.run(sink.flush())
    assert list(sink.pending) == rows
    monkeypatch.undo()
    sink.flush_at_exit()  # as at exit (or SIGTERM's drain)
    assert not sink.pending
    assert sorted(str(r.request_id) for r in usage_rows()) == sorted(r["request_id"] for r in rows)
    assert {r.input_tokens for r in usage_rows()} == {0}


@needs_redis
def test_hostile_values_through_the_redis_stream_are_written(people, redis_stream):
    org = people["acme"].id
    rows = [
        a_row(org, session_id="a\x00b", endpoint="GET /v1/responses/\x00abc"),
        a_row(org, output_tokens=2**40, model="m\x00"),
        a_row(org, ttft_ms=math.inf, user_agent="ua\x00" * 200),
    ]
    for row in rows:
        xadd(redis_stream, row)
    assert usage.drain_redis(redis_stream, consumer="w") == 3
    stored = {str(r.request_id): r for r in usage_rows()}
    assert sorted(stored) == sorted(r["request_id"] for r in rows)
    assert stored[rows[0]["request_id"]].session_id == "a\ufffdb"
    assert stored[rows[1]["request_id"]].output_tokens == 2**31 - 1
    assert len(stored[rows[2]["request_id"]].user_agent) == 300
    assert UsageDeadLetter.objects.count() == 0
    assert redis_stream.xlen(usage.dead_letter_stream()) == 0


def test_request_ids_become_uuids_once():
    row = a_row(1)
    assert usage_insert.prepared_row(row)["request_id"] == uuid.UUID(row["request_id"])
