"""``manage.py usage_export``: one organisation's rows, filtered, as CSV or JSON lines."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.core.management import CommandError, call_command

from responses_api.usage import writer as usage
from tests.usage.test_durability import a_row

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture
def log(people):
    acme, globex = people["acme"].id, people["globex"].id
    rows = [
        a_row(acme, status=200, created_at=(DAY + timedelta(hours=1)).timestamp()),
        a_row(
            acme,
            status=499,
            note="Client disconnected",
            output_tokens=3,
            created_at=(DAY + timedelta(hours=2)).timestamp(),
        ),
        a_row(acme, status=429, output_tokens=0, created_at=(DAY + timedelta(days=2)).timestamp()),
        a_row(globex, status=200, created_at=(DAY + timedelta(hours=1)).timestamp()),
    ]
    assert usage.write_rows(rows) == []
    return rows


def export(*args: str) -> str:
    out = io.StringIO()
    call_command("usage_export", *args, stdout=out)
    return out.getvalue()


def test_csv_has_a_header_and_only_the_organisations_rows_oldest_first(log):
    records = list(csv.DictReader(io.StringIO(export("--org", "acme", "--format", "csv"))))
    assert [r["request_id"] for r in records] == [r["request_id"] for r in log[:3]]
    assert [r["status"] for r in records] == ["200", "499", "429"]
    assert records[1]["note"] == "Client disconnected"
    assert "prompt" not in records[0] and "organisation" not in ",".join(records[0])


def test_jsonl_filters_by_time_and_status(log):
    lines = export(
        "--org", "acme", "--format", "jsonl", "--since", "2026-05-01", "--until", "2026-05-02"
    ).splitlines()
    rows = [orjson.loads(line) for line in lines]
    assert [r["request_id"] for r in rows] == [log[0]["request_id"], log[1]["request_id"]]
    assert rows[1]["status"] == 499 and rows[1]["output_tokens"] == 3
    only_429 = export("--org", "acme", "--format", "jsonl", "--status", "429").splitlines()
    assert [orjson.loads(line)["request_id"] for line in only_429] == [log[2]["request_id"]]


def test_another_organisations_rows_never_appear(log):
    text = export("--org", "globex", "--format", "jsonl")
    assert [orjson.loads(line)["request_id"] for line in text.splitlines()] == [
        log[3]["request_id"]
    ]


def test_unknown_organisation_and_bad_dates_are_errors(log):
    with pytest.raises(CommandError, match="No organisation"):
        export("--org", "nope")
    with pytest.raises(CommandError, match="ISO 8601"):
        export("--org", "acme", "--since", "yesterday")


def test_a_log_larger_than_one_chunk_is_exported_whole(people, monkeypatch):
    from responses_api.management.commands import usage_export

    monkeypatch.setattr(usage_export, "CHUNK", 100)
    usage.write_rows([a_row(people["acme"].id) for _ in range(450)])
    text = export("--org", "acme", "--format", "csv")
    assert len(text.splitlines()) == 451
