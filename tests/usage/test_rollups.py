"""The roll-ups are the raw log's sums, exactly: after a live load with
cancellations, and after a writer failed between inserting rows and adding
them up (nothing lost, nothing counted twice on redelivery)."""

from __future__ import annotations

import os
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from django.db import connection

from responses_api.models import UsageDaily, UsageHourly, UsageLog
from responses_api.runtime import histogram
from responses_api.usage import insert as usage_insert
from responses_api.usage import rollups
from responses_api.usage import writer as usage
from tests.conftest import wait_rows
from tests.usage.test_durability import a_row, xadd

needs_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="the usage stream lives in Redis: set REDIS_URL"
)


def raw_cells(table=UsageHourly) -> dict:
    """Every roll-up cell recomputed from the raw rows, the slow way."""
    cells: dict = defaultdict(lambda: defaultdict(int))
    for row in UsageLog.objects.all():
        start = rollups.hour_of(row.created_at)
        if table is UsageDaily:
            start = rollups.day_of(start)
        klass = rollups.status_class(row.status)
        cell = cells[
            (
                row.organisation_id,
                start,
                row.model,
                row.api_key_id or rollups.NO_ID,
                row.backend_id or rollups.NO_ID,
                klass,
            )
        ]
        cell["requests"] += 1
        cell["errors"] += row.status >= 400 and row.status != 499
        for name in ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens"):
            cell[name] += getattr(row, name)
        cell["cost_nanos"] += rollups.cost_nanos(row.cost)
        if row.ttft_ms is not None:
            cell[histogram.COLUMNS[histogram.bucket_of(row.ttft_ms)]] += 1
    return {key: dict(value) for key, value in cells.items()}


def stored_cells(table=UsageHourly) -> dict:
    stored = {}
    for cell in table.objects.all():
        key = (
            cell.organisation_id,
            cell.bucket_start,
            cell.model,
            cell.api_key_id,
            cell.backend_id,
            cell.status_class,
        )
        stored[key] = {
            name: getattr(cell, name)
            for name in (*rollups.MEASURES, *histogram.COLUMNS)
            if getattr(cell, name)
        }
    return stored


def assert_rollups_match_the_log() -> None:
    for table in (UsageHourly, UsageDaily):
        raw = {k: {n: v for n, v in sums.items() if v} for k, sums in raw_cells(table).items()}
        assert stored_cells(table) == raw, table.__name__


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_rollups_equal_the_raw_sums_after_a_load_with_cancellations(
    provision, simulator, api_server
):
    acme = provision("acme", simulator.url)
    globex = provision("globex", simulator.url)

    def call(job: tuple[str, int]) -> str:
        kind, i = job
        key = globex.key if i % 4 == 0 else acme.key
        client = openai.OpenAI(base_url=api_server.url + "/v1", api_key=key, max_retries=0)
        try:
            if kind == "plain":
                client.responses.create(
                    model="sim-model", input=f"plain {i} [[tokens:{i % 9 + 1}]]"
                )
            elif kind == "stream":
                with client.responses.stream(
                    model="sim-model", input=f"stream {i} [[tokens:{i % 7 + 2}]]"
                ) as stream:
                    stream.get_final_response()
            elif kind == "cancel":
                with client.responses.stream(
                    model="sim-model", input=f"cancel {i} [[tokens:300]] [[rate:50]]"
                ) as stream:
                    for event in stream:
                        if event.type == "response.output_text.delta":
                            break  # leaving the block closes the connection
            else:
                client.responses.create(model="sim-model", input="x", extra_body={"messages": []})
        except openai.BadRequestError:
            return "400"
        finally:
            client.close()
        return kind

    jobs = [(kind, i) for i in range(12) for kind in ("plain", "stream", "cancel", "bad")]
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(call, jobs))
    assert outcomes.count("400") == 12
    rows = wait_rows(len(jobs), timeout=30)
    wait_rows(12, timeout=30, status=499)
    statuses = sorted(r.status for r in UsageLog.objects.all())
    assert statuses.count(499) == 12 and statuses.count(400) == 12 and statuses.count(200) == 24
    assert len(rows) == len(jobs)
    assert_rollups_match_the_log()
    cancelled = UsageHourly.objects.filter(status_class="499")
    assert sum(c.requests for c in cancelled) == 12
    assert sum(c.output_tokens for c in cancelled) > 0  # the tokens sent before the cancel


@pytest.mark.django_db(transaction=True)
def test_a_batch_written_twice_is_counted_once(people):
    rows = [a_row(people["acme"].id, ttft_ms=120.0, cost="0.00012") for _ in range(5)]
    assert usage.write_rows(rows + rows[:2]) == []
    assert usage.write_rows(rows) == []
    assert UsageLog.objects.count() == 5
    assert sum(c.requests for c in UsageHourly.objects.all()) == 5
    assert_rollups_match_the_log()


class Crash(BaseException):
    """A writer dying after inserting the rows, before the roll-ups commit.
    Not an ``Exception``: the writer takes those as a row's error and
    retries the batch row by row; a dying process retries nothing."""


@pytest.fixture
def crash_in_rollups(monkeypatch):
    """Make the next roll-up upsert (after the rows were inserted in the
    same transaction) fail, once."""
    real = rollups.rollups_add_cells
    calls = {"n": 0}

    def failing(hours):
        calls["n"] += 1
        if calls["n"] == 1:
            assert UsageLog.objects.count() > 0  # the rows are in, uncommitted
            raise Crash
        real(hours)

    monkeypatch.setattr(rollups, "rollups_add_cells", failing)
    return calls


@pytest.mark.django_db(transaction=True)
def test_a_crash_between_rows_and_rollups_loses_and_doubles_nothing(people, crash_in_rollups):
    rows = [a_row(people["acme"].id, status=s) for s in (200, 200, 429, 499, 502)]
    with pytest.raises(Crash):
        usage.write_rows(rows)
    assert UsageLog.objects.count() == 0 and UsageHourly.objects.count() == 0
    # Redelivered (the stream still holds them), then delivered once more.
    assert usage.write_rows(rows) == []
    assert usage.write_rows(rows) == []
    assert UsageLog.objects.count() == 5
    assert {c.status_class: c.requests for c in UsageHourly.objects.all()} == {
        "2xx": 2,
        "429": 1,
        "499": 1,
        "5xx": 1,
    }
    assert_rollups_match_the_log()


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_a_writer_crashing_mid_batch_leaves_the_batch_for_another(
    people, redis_stream, crash_in_rollups
):
    rows = [a_row(people["acme"].id, ttft_ms=float(40 * i)) for i in range(6)]
    for row in rows:
        xadd(redis_stream, row)
    with pytest.raises(Crash):
        usage.drain_redis(redis_stream, consumer="dies")
    assert UsageLog.objects.count() == 0 and UsageHourly.objects.count() == 0
    # Another writer claims the pending entries; one is also delivered again.
    xadd(redis_stream, rows[0])
    assert usage.drain_redis(redis_stream, consumer="survivor", claim_idle_ms=0) == 7
    assert UsageLog.objects.count() == 6
    assert sum(c.requests for c in UsageDaily.objects.all()) == 6
    assert_rollups_match_the_log()


@pytest.mark.parametrize("count", [0, 1, 2, 7, 500, 857, 1000, 4097])
def test_a_batch_is_inserted_by_statements_of_a_few_sizes(count):
    from responses_api.usage.insert import _chunks

    chunks = _chunks(count, 857)
    assert sum(size for _, size in chunks) == count
    assert [start for start, _ in chunks] == [
        sum(s for _, s in chunks[:i]) for i in range(len(chunks))
    ]
    assert all(size & (size - 1) == 0 and size <= 512 for _, size in chunks)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's column arrays")
def test_postgresql_takes_a_batch_as_column_arrays_of_128_rows(people):
    """One array per column: the statement's text, and so psycopg's parse of
    it, is the same for any number of rows."""
    from django.test.utils import CaptureQueriesContext

    rows = [a_row(people["acme"].id) for _ in range(300)]
    with CaptureQueriesContext(connection) as queries:
        assert usage.write_rows(rows) == []
    table = UsageLog._meta.db_table
    inserts = [
        q["sql"] for q in queries.captured_queries if q["sql"].startswith(f'INSERT INTO "{table}"')
    ]
    assert len(inserts) == 3 and all("FROM unnest(" in sql for sql in inserts)
    assert UsageLog.objects.count() == 300
    statement = usage_insert._insert.sql(connection, 1)
    assert statement == usage_insert._insert.sql(connection, 300)
    assert statement.count("%s") == len(usage_insert._insert.fields)


@pytest.mark.django_db(transaction=True)
def test_a_row_the_writer_inserts_reads_back_as_the_orm_stores_it(people):
    """Every column, with the values that quoting gets wrong: quotes, braces,
    backslashes, commas, a text "NULL", line breaks, nested JSON, NULLs."""
    from accounts.services.api_keys import api_key_create

    key, _ = api_key_create(organisation=people["acme"], name="writer")
    awkward = 'say "hi", {x}\\y \\"z\\" NULL\n\tend \u00e9\U0001f98a'
    fields = {
        "api_key_id": key.id,
        "key_prefix": "sy_sk_{,}",
        "model": awkward[:200],
        "backend_name": "b,{c}",
        "endpoint": "/responses",
        "method": "POST",
        "stream": True,
        "status": 502,
        "error_code": "NULL",
        "error_message": awkward * 3,
        "note": "",
        "notices": [{"code": "x", "message": awkward, "nested": {"a": [1, None, "}"]}}],
        "input_tokens": 2_000_000_000,
        "cached_tokens": 0,
        "output_tokens": 7,
        "reasoning_tokens": 3,
        "cost": "0.00012345",
        "attempts": 2,
        "queue_wait_ms": None,
        "ttft_ms": 12.5,
        "duration_ms": 1e-9,
        "tokens_per_second": None,
        "client_ip": "2001:db8::1",
        "user_agent": awkward,
        "session_id": "s",
        "thread_id": "",
        "client_request_id": "NULL",
        "originator": "codex_cli_rs",
    }
    row = a_row(people["acme"].id, **fields)
    written = [row, {**row, "request_id": str(uuid.uuid4())}]
    assert usage.write_rows(written[:1]) == []
    by_orm = usage_insert.prepared_row(written[1])
    UsageLog.objects.create(**by_orm)
    columns = [f.attname for f in usage_insert._insert.fields if f.attname not in ("request_id",)]
    first, second = (
        UsageLog.objects.filter(request_id=row["request_id"]).values(*columns).get()
        for row in written
    )
    assert first == second
    assert first["notices"] == fields["notices"] and first["model"] == awkward[:200]
