"""Dashboard numbers, read from the usage roll-ups (``responses_api/usage/rollups.py``).

The roll-ups are kept per hour and per UTC day as rows are written, so a
view costs the same however large the log is: the 24-hour and 7-day charts
read hourly cells, the 30-day chart daily ones, and the totals and tables
the daily cells of whole days plus the hourly cells around them.
Percentiles of time to first token come from the cells' fixed-edge
histograms, exact to within a bucket's width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from accounts.models import ApiKey
from responses_api.models import NO_ID
from responses_api.usage.summary import Sums, rollup_sums, span_sums


@dataclass(frozen=True, slots=True)
class Window:
    key: str
    label: str
    span: timedelta
    bucket: timedelta


WINDOWS = {
    "24h": Window("24h", "Last 24 hours", timedelta(hours=24), timedelta(hours=1)),
    "7d": Window("7d", "Last 7 days", timedelta(days=7), timedelta(hours=6)),
    "30d": Window("30d", "Last 30 days", timedelta(days=30), timedelta(days=1)),
}
TOP = 20


def percentile(values: list[float], fraction: float) -> float | None:
    """Linear interpolation between closest ranks (as ``percentile_cont``)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _row(sums: Sums) -> dict[str, Any]:
    requests = sums.requests
    return {
        **sums.dims,
        "requests": requests,
        "errors": sums.errors,
        "cancelled": sums.cancelled,
        "input_tokens": sums.input_tokens,
        "output_tokens": sums.output_tokens,
        "tokens": sums.input_tokens + sums.output_tokens,
        "cost": sums.cost,
        "error_rate": (sums.errors / requests) if requests else 0.0,
        "cancel_rate": (sums.cancelled / requests) if requests else 0.0,
        "p50": sums.p(0.5),
        "p95": sums.p(0.95),
    }


@dataclass
class Bucket:
    start: datetime
    requests: int = 0
    ok: int = 0
    errors: int = 0
    cancelled: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    p50: float | None = None
    p95: float | None = None


@dataclass
class Dashboard:
    window: Window
    since: datetime
    totals: dict[str, Any]
    buckets: list[Bucket] = field(default_factory=list)
    by_model: list[dict[str, Any]] = field(default_factory=list)
    by_key: list[dict[str, Any]] = field(default_factory=list)


def _top(cells: list[Sums]) -> list[Sums]:
    return sorted(cells, key=lambda s: -s.requests)[:TOP]


def dashboard_build(
    *, organisation_id: int, window: Window, now: datetime | None = None
) -> Dashboard:
    """Totals, a time series and per-model / per-key tables for ``window``."""
    now = now or timezone.now()
    daily = window.bucket >= timedelta(days=1)
    # Buckets are aligned to whole hours (UTC days for the 30-day view).
    if daily:
        end = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    else:
        end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    since = end - window.span
    width = "1d" if daily else "1h"

    whole = span_sums(organisation_id, start=since, end=end)
    totals = _row(whole[0] if whole else Sums(dims={}))

    count = int(window.span / window.bucket)
    sums = [Sums(dims={}) for _ in range(count)]
    for cell in rollup_sums(
        organisation_id, start=since, end=end, width=width, by=["bucket_start"]
    ):
        index = int((cell.dims["bucket_start"] - since) / window.bucket)
        if 0 <= index < count:
            sums[index].add(cell)
    buckets = []
    for i, s in enumerate(sums):
        buckets.append(
            Bucket(
                start=since + window.bucket * i,
                requests=s.requests,
                ok=s.requests - s.errors - s.cancelled,
                errors=s.errors,
                cancelled=s.cancelled,
                input_tokens=s.input_tokens,
                output_tokens=s.output_tokens,
                p50=s.p(0.5),
                p95=s.p(0.95),
            )
        )

    by_model = [
        _row(s) for s in _top(span_sums(organisation_id, start=since, end=end, by=["model"]))
    ]
    keys = span_sums(organisation_id, start=since, end=end, by=["api_key_id"])
    by_key = [_row(s) for s in _top(keys)]
    names = {
        key.id: key
        for key in ApiKey.objects.filter(
            organisation_id=organisation_id, id__in=[r["api_key_id"] for r in by_key]
        ).only("id", "name", "prefix")
    }
    for r in by_key:
        key = names.get(r["api_key_id"])
        r["name"] = key.name if key else None
        r["key_prefix"] = key.prefix if key else ""
        if r["api_key_id"] == NO_ID:
            r["api_key_id"] = None
    return Dashboard(window, since, totals, buckets, by_model, by_key)
