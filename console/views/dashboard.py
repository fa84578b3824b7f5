"""The dashboard: requests, tokens, errors and latency as charts."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.access import is_support
from console import charts
from console.spend import organisation_month
from console.stats import WINDOWS, dashboard_build
from responses_api.usage.deadletters import deadletters_for


def _label(start, bucket: timedelta) -> str:
    if bucket >= timedelta(days=1):
        return start.strftime("%d %b")
    if bucket > timedelta(hours=1):
        return start.strftime("%a %Hh")
    return start.strftime("%H:%M")


def _dead_letters(request: HttpRequest, membership) -> int:
    """Usage rows the database refused (``manage.py usage_deadletters``):
    every organisation's for platform staff, who can act on them; the
    organisation's own for its members, whose figures miss them."""
    organisation_id = None if is_support(request.user) else membership.organisation_id
    return deadletters_for(organisation_id=organisation_id).count()


def dashboard_page(request: HttpRequest, membership) -> HttpResponse:
    window = WINDOWS.get(request.GET.get("range", ""), WINDOWS["24h"])
    data = dashboard_build(organisation_id=membership.organisation_id, window=window)
    labels = [_label(b.start, window.bucket) for b in data.buckets]
    requests_chart = charts.stacked_bars(
        labels,
        [
            charts.Series("OK", "s1", [b.ok for b in data.buckets]),
            charts.Series("Errors", "s3", [b.errors for b in data.buckets]),
            charts.Series("Client disconnected (499)", "s4", [b.cancelled for b in data.buckets]),
        ],
        title="Requests",
    )
    tokens_chart = charts.stacked_bars(
        labels,
        [
            charts.Series("Input", "s2", [b.input_tokens for b in data.buckets]),
            charts.Series("Output", "s1", [b.output_tokens for b in data.buckets]),
        ],
        title="Tokens",
    )
    error_chart = charts.lines(
        labels,
        [
            charts.Series(
                "Error rate",
                "s3",
                [100 * b.errors / b.requests if b.requests else None for b in data.buckets],
            ),
            charts.Series(
                "499 rate",
                "s4",
                [100 * b.cancelled / b.requests if b.requests else None for b in data.buckets],
            ),
        ],
        title="Error and 499 rates",
        unit="%",
    )
    ttft_chart = charts.lines(
        labels,
        [
            charts.Series("p50", "s1", [b.p50 for b in data.buckets]),
            charts.Series("p95", "s2", [b.p95 for b in data.buckets]),
        ],
        title="Time to first token",
        unit=" ms",
    )
    return render(
        request,
        "console/dashboard.html",
        {
            "data": data,
            "windows": WINDOWS.values(),
            "requests_chart": requests_chart,
            "tokens_chart": tokens_chart,
            "error_chart": error_chart,
            "ttft_chart": ttft_chart,
            "month": organisation_month(membership.organisation),
            "warning": membership.organisation.budget_warning_percent,
            "dead_letters": _dead_letters(request, membership),
        },
    )
