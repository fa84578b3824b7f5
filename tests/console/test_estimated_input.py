"""Input tokens estimated from the request (a client that left before the
backend reported usage) are marked so wherever a row's input tokens show:
the trace, the usage log, a session's turns, and the management API's
usage records."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.admin_api.conftest import admin_keys, api  # noqa: F401
from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db

ESTIMATED_TITLE = "Estimated from the request"


@pytest.fixture
def two_rows(crew):
    cancelled = usage_row(
        crew["acme"],
        status=499,
        error_code="client_disconnected",
        note="Client disconnected",
        input_tokens=321,
        input_tokens_estimated=True,
        output_tokens=5,
        session_id="session-estimates",
    )
    completed = usage_row(crew["acme"], input_tokens=123, session_id="session-estimates")
    return cancelled, completed


def input_cell(html: str) -> str:
    return re.search(r'<dd id="trace-input">(.*?)</dd>', html, re.S).group(1)


def test_the_trace_marks_estimated_input_tokens(as_user, two_rows):
    cancelled, completed = two_rows
    client = as_user("bob")
    html = client.get(reverse("console:trace", args=[cancelled.request_id])).content.decode()
    assert "321" in input_cell(html) and "estimated</span>" in input_cell(html)
    assert "the 321 input tokens are estimated from the request" in html
    html = client.get(reverse("console:trace", args=[completed.request_id])).content.decode()
    assert "123" in input_cell(html) and "estimated" not in input_cell(html)


def test_the_usage_log_and_the_session_mark_estimated_input_tokens(as_user, two_rows):
    client = as_user("bob")
    for url in (reverse("console:usage"), reverse("console:session", args=["session-estimates"])):
        html = client.get(url).content.decode()
        rows = {
            tokens: row
            for row in re.findall(r"<tr>.*?</tr>", html, re.S)
            for tokens in ("321", "123")
            if f">{tokens}</td>" in row
        }
        assert ESTIMATED_TITLE in rows["321"], url
        assert ESTIMATED_TITLE not in rows["123"], url


def test_the_management_api_says_which_input_tokens_are_estimated(api, two_rows):  # noqa: F811
    cancelled, completed = two_rows
    records = api().get("/api/v1/admin/usage").json()["data"]
    estimated = {r["id"]: (r["input_tokens"], r["input_tokens_estimated"]) for r in records}
    assert estimated[str(cancelled.request_id)] == (321, True)
    assert estimated[str(completed.request_id)] == (123, False)
