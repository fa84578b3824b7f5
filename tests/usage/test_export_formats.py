"""Usage exports write numbers as people read them: money in decimals, never
an exponent; timings in whole milliseconds; flags as ``true``/``false``."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.core.management import call_command

from console.usage import usage_csv_lines
from responses_api.models import UsageLog
from responses_api.usage import writer as usage
from tests.usage.test_durability import a_row

pytestmark = pytest.mark.django_db

TIMED = {
    "stream": True,
    "input_tokens_estimated": False,
    "queue_wait_ms": 0.41,
    "ttft_ms": 25.824872000157484,
    "duration_ms": 1234.5678,
    "tokens_per_second": 87.7321,
}


@pytest.fixture
def rows(people):
    free = a_row(people["acme"].id, cost=Decimal("0"), **TIMED)
    priced = a_row(people["acme"].id, cost=Decimal("0.00001234"), stream=False)
    assert usage.write_rows([free, priced]) == []
    return free, priced


def _records(text: str) -> dict[str, dict[str, str]]:
    return {r["request_id"]: r for r in csv.DictReader(io.StringIO(text))}


def _check(records: dict[str, dict[str, str]], free: dict, priced: dict) -> None:
    record = records[free["request_id"]]
    assert record["cost"] == "0.00"
    assert record["stream"] == "true" and record["input_tokens_estimated"] == "false"
    assert record["queue_wait_ms"] == "0"
    assert record["ttft_ms"] == "26"
    assert record["duration_ms"] == "1235"
    assert record["tokens_per_second"] == "87.7"
    other = records[priced["request_id"]]
    assert other["cost"] == "0.00001234" and other["stream"] == "false"
    assert other["ttft_ms"] == ""


def test_the_consoles_csv_export_formats_numbers_for_people(rows):
    queryset = UsageLog.objects.filter(request_id__in=[r["request_id"] for r in rows])
    _check(_records("".join(usage_csv_lines(queryset))), *rows)


def test_the_usage_export_command_formats_numbers_for_people(rows):
    out = io.StringIO()
    call_command("usage_export", "--org", "acme", "--format", "csv", stdout=out)
    _check(_records(out.getvalue()), *rows)
