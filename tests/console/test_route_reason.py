"""The trace says why its backend was chosen and how much of the prompt it
was expected to have cached; the usage records carry both."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db


def cell(html: str, name: str) -> str:
    return re.search(rf'<dd id="trace-{name}">(.*?)</dd>', html, re.S).group(1)


def test_the_trace_shows_the_route_reason_and_the_expected_prefix(as_user, crew):
    routed = usage_row(crew["acme"], route_reason="prefix", prefix_reused_tokens=1984)
    unrouted = usage_row(crew["acme"], status=429, error_code="rate_limit_exceeded")
    client = as_user("bob")
    html = client.get(reverse("console:trace", args=[routed.request_id])).content.decode()
    assert cell(html, "route-reason") == "<code>prefix</code>"
    assert cell(html, "prefix") == "1984 tokens"
    html = client.get(reverse("console:trace", args=[unrouted.request_id])).content.decode()
    assert cell(html, "route-reason") == "–" and cell(html, "prefix") == "–"


def test_the_usage_export_ends_with_the_route_the_tool_then_the_response_columns():
    from responses_api.usage.columns import USAGE_EXPORT_COLUMNS

    # Appended, so an export read by position keeps its earlier columns; the
    # tool columns came after, then the response's.
    assert USAGE_EXPORT_COLUMNS[-7:] == (
        "route_reason",
        "prefix_reused_tokens",
        "tool_calls",
        "tool_errors",
        "tool_ms",
        "response_id",
        "background",
    )
