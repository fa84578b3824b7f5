"""The usage log on the management API: filters, cursor pages, and CSV and
JSON lines streamed in bounded memory."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient
from django.utils import timezone

from responses_api.models import UsageLog
from responses_api.usage import export as usage_export
from tests.admin_api.conftest import ADMIN, error_of, usage_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(estates):
    acme = estates["acme"]
    now = timezone.now()
    made = {
        "ok": acme.row,
        "cancelled": usage_row(
            acme.key.organisation,
            status=499,
            stream=True,
            note="Client disconnected",
            session_id="019a2b7c-session",
            originator="codex_exec",
            created_at=now - timedelta(minutes=3),
        ),
        "refused": usage_row(
            acme.key.organisation, status=429, created_at=now - timedelta(minutes=2)
        ),
        "failed": usage_row(
            acme.key.organisation,
            status=502,
            model="other-model",
            api_key=acme.key,
            backend=acme.backend,
            created_at=now - timedelta(minutes=1),
        ),
        "old": usage_row(acme.key.organisation, created_at=now - timedelta(days=2)),
    }
    return made


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [r["id"] for r in response.json()["data"]]


def rid(row) -> str:
    return str(row.request_id)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status": "499"}, ["cancelled"]),
        ({"status": "4xx"}, ["refused"]),
        ({"status": "5xx"}, ["failed"]),
        ({"model": "other-model"}, ["failed"]),
        ({"stream": "true"}, ["cancelled"]),
        ({"stream": "false", "status": "200"}, ["ok", "old"]),
        ({"session": "019a2b7c-session"}, ["cancelled"]),
    ],
)
def test_usage_filters(api, rows, query, expected):
    assert ids(api("acme").get(f"{ADMIN}/usage", query)) == [rid(rows[n]) for n in expected]


def test_records_carry_the_client_session(api, rows):
    (record,) = api("acme").get(f"{ADMIN}/usage", {"session": "019a2b7c-session"}).json()["data"]
    assert (record["session_id"], record["originator"]) == ("019a2b7c-session", "codex_exec")


def test_usage_filters_by_request_id_key_backend_and_time(api, rows, estates):
    client = api("acme")
    assert ids(client.get(f"{ADMIN}/usage", {"request_id": rid(rows["failed"])})) == [
        rid(rows["failed"])
    ]
    keyed = ids(client.get(f"{ADMIN}/usage", {"key": str(estates["acme"].key.id)}))
    assert keyed == [rid(rows["failed"]), rid(rows["ok"])]
    on_backend = ids(client.get(f"{ADMIN}/usage", {"backend": str(estates["acme"].backend.id)}))
    assert on_backend == keyed
    day_ago = timezone.now() - timedelta(days=1)
    recent = ids(client.get(f"{ADMIN}/usage", {"since": day_ago.isoformat()}))
    assert rid(rows["old"]) not in recent and len(recent) == 4
    older = ids(client.get(f"{ADMIN}/usage", {"until": str(int(day_ago.timestamp()))}))
    assert older == [rid(rows["old"])]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ({"status": "abc"}, "status"),
        ({"stream": "maybe"}, "stream"),
        ({"request_id": "nope"}, "request_id"),
        ({"since": "last week"}, "since"),
        ({"format": "xml"}, "format"),
        ({"limit": "1001"}, "limit"),
        ({"after": str(uuid.uuid4())}, "after"),
    ],
)
def test_bad_usage_queries_name_the_parameter(api, rows, query, param):
    response = api("acme").get(f"{ADMIN}/usage", query)
    assert response.status_code == 400 and error_of(response)["param"] == param


def test_usage_records_page_newest_first(api, rows):
    client = api("acme")
    first = client.get(f"{ADMIN}/usage", {"limit": 2}).json()
    assert first["has_more"] is True
    assert [r["id"] for r in first["data"]] == [rid(rows["failed"]), rid(rows["refused"])]
    record = first["data"][0]
    assert record["object"] == "usage_record" and record["status"] == 502
    assert record["key_id"] == str(rows["failed"].api_key_id)
    rest = client.get(f"{ADMIN}/usage", {"after": first["last_id"], "limit": 10}).json()
    assert rest["has_more"] is False
    assert [r["id"] for r in rest["data"]] == [rid(rows[n]) for n in ("cancelled", "ok", "old")]


def test_csv_and_jsonl_stream_the_same_filtered_rows(api, rows):
    client = api("acme")
    as_csv = client.get(f"{ADMIN}/usage", {"format": "csv", "status": "5xx"})
    assert as_csv["Content-Type"].startswith("text/csv") and as_csv["X-Request-Id"]
    table = list(csv.DictReader(io.StringIO(b"".join(as_csv.streaming_content).decode())))
    assert [r["request_id"] for r in table] == [rid(rows["failed"])]
    assert table[0]["organisation"] == "acme" and table[0]["status"] == "502"
    as_jsonl = client.get(f"{ADMIN}/usage", {"format": "jsonl"})
    assert as_jsonl["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(as_jsonl.streaming_content).splitlines()]
    page = client.get(f"{ADMIN}/usage", {"limit": 100}).json()["data"]
    assert lines == page


# Rows in the export, and rows read from the database at once. The bound
# below (a fifth of the text sent: 1.7 MB of CSV's 8.7 MB) holds what a
# streamed export keeps (about 0.65 MB of fixed cost, and some 1.2 kB of
# Python objects per row of the chunk) twice over; the export's rows held at
# once would take some 50 MB, and its whole text is more than the bound.
ROWS = 25_000
CHUNK = 100


@pytest.fixture
def many_rows(estates):
    """``ROWS`` rows, inserted with one executemany (the ORM's bulk_create
    takes longer than the export being measured)."""
    from django.db import connection

    organisation = estates["acme"].key.organisation
    template = UsageLog(
        request_id=uuid.uuid4(),
        organisation=organisation,
        endpoint="/v1/responses",
        model="sim-model",
        status=200,
        input_tokens=100,
        output_tokens=200,
        user_agent="load-test/1.0 (a user agent of some length, as clients send them)",
    )
    fields = [f for f in UsageLog._meta.concrete_fields if not f.primary_key]
    names = [f.column for f in fields]
    at = {name: i for i, name in enumerate(names)}
    base = [f.get_db_prep_save(getattr(template, f.attname), connection) for f in fields]
    start = timezone.now() - timedelta(days=1)
    values = []
    for n in range(ROWS):
        row = list(base)
        row[at["request_id"]] = UsageLog._meta.get_field("request_id").get_db_prep_save(
            uuid.uuid4(), connection
        )
        row[at["created_at"]] = UsageLog._meta.get_field("created_at").get_db_prep_save(
            start + timedelta(milliseconds=n), connection
        )
        values.append(row)
    table = connection.ops.quote_name(UsageLog._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(n) for n in names)
    marks = ", ".join(["%s"] * len(names))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", values)
    del values
    return organisation


def _peak_sync(response) -> tuple[int, int, int]:
    tracemalloc.start()
    size = lines = 0
    for piece in response.streaming_content:
        size += len(piece)
        lines += piece.count(b"\n")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return size, lines, peak


def _peak_asgi(raw_key: str) -> tuple[int, int, int]:
    async def consume() -> tuple[int, int, int]:
        response = await AsyncClient().get(
            f"{ADMIN}/usage", {"format": "jsonl"}, headers={"Authorization": f"Bearer {raw_key}"}
        )
        assert response.status_code == 200
        size = lines = 0
        tracemalloc.start()
        async for piece in response.streaming_content:
            size += len(piece)
            lines += piece.count(b"\n")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size, lines, peak

    return async_to_sync(consume)()


@pytest.mark.timeout(300)
def test_a_large_export_streams_in_bounded_memory(api, admin_keys, many_rows, capsys, monkeypatch):
    """``ROWS`` rows (megabytes of text) pass with a fraction of that at most
    traced at once: a chunk of rows and a piece of text, never the whole
    export. Also on the ASGI path (daphne's), where Django would gather a
    synchronous iterator into a list before sending it."""
    monkeypatch.setattr(usage_export, "CHUNK", CHUNK)
    measured = {
        "csv": _peak_sync(api("acme").get(f"{ADMIN}/usage", {"format": "csv"})),
        "jsonl": _peak_sync(api("acme").get(f"{ADMIN}/usage", {"format": "jsonl"})),
        "jsonl under ASGI": _peak_asgi(admin_keys["acme"]),
    }
    with capsys.disabled():
        for name, (size, lines, peak) in measured.items():
            print(f"\n{name}: {lines} lines, {size / 1e6:.1f} MB sent, peak {peak / 1e6:.2f} MB")
    for size, lines, peak in measured.values():
        assert lines >= ROWS + 1  # every row (and the estate's)
        assert size > ROWS * 200
        assert peak < size / 5, (size, peak)
