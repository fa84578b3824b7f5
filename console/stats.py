"""Dashboard numbers, computed from the usage log with aggregate queries.

Percentiles of time to first token use PostgreSQL's ``percentile_cont`` when
the database is PostgreSQL, and elsewhere (SQLite, the embedded default) the
exact percentile of a bounded sample of the most recent rows, so a large log
never loads whole into memory.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncDay, TruncHour
from django.utils import timezone

# Rows sampled per group when percentiles are computed in Python.
SAMPLE = 20_000


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

ERROR = Q(status__gte=400) & ~Q(status=499)
CANCELLED = Q(status=499)


class PercentileCont(Aggregate):
    """PostgreSQL's ordered-set aggregate ``percentile_cont(p)``."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=float(fraction), **extra)


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


def percentile(values: list[float], fraction: float) -> float | None:
    """Linear interpolation between closest ranks (as ``percentile_cont``)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ttft_percentiles(
    queryset: QuerySet, group: str | None = None
) -> dict[Any, tuple[float | None, float | None]]:
    """p50 and p95 of ``ttft_ms`` per value of ``group`` (one key, None, if no group)."""
    rows = queryset.filter(ttft_ms__isnull=False)
    if _on_postgres():
        p50, p95 = PercentileCont("ttft_ms", 0.5), PercentileCont("ttft_ms", 0.95)
        if group is None:
            whole = rows.aggregate(p50=p50, p95=p95)
            return {None: (whole["p50"], whole["p95"])} if whole["p50"] is not None else {}
        aggregated = rows.values(group).order_by().annotate(p50=p50, p95=p95)
        return {r[group]: (r["p50"], r["p95"]) for r in aggregated}
    samples: dict[Any, list[float]] = defaultdict(list)
    if group:
        for key, value in rows.order_by("-created_at").values_list(group, "ttft_ms")[:SAMPLE]:
            samples[key].append(value)
    else:
        samples[None] = list(
            rows.order_by("-created_at").values_list("ttft_ms", flat=True)[:SAMPLE]
        )
    return {k: (percentile(v, 0.5), percentile(v, 0.95)) for k, v in samples.items()}


def _counts() -> dict[str, Any]:
    return {
        "requests": Count("id"),
        "errors": Count("id", filter=ERROR),
        "cancelled": Count("id", filter=CANCELLED),
        "input_tokens": Coalesce(Sum("input_tokens"), 0),
        "output_tokens": Coalesce(Sum("output_tokens"), 0),
    }


def _rates(row: dict[str, Any]) -> dict[str, Any]:
    requests = row.get("requests") or 0
    row["tokens"] = (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0)
    row["error_rate"] = (row["errors"] / requests) if requests else 0.0
    row["cancel_rate"] = (row["cancelled"] / requests) if requests else 0.0
    return row


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


def _bucket_start(stamp: datetime, since: datetime, size: timedelta) -> datetime:
    return since + size * int((stamp - since) / size)


def dashboard_build(*, usage: QuerySet, window: Window, now: datetime | None = None) -> Dashboard:
    """Totals, a time series and per-model / per-key tables for ``window``."""
    now = now or timezone.now()
    # Buckets are aligned to whole hours (days for the 30-day view).
    trunc = TruncDay if window.bucket >= timedelta(days=1) else TruncHour
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    if trunc is TruncDay:
        end = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    since = end - window.span
    rows = usage.filter(created_at__gte=since)

    totals = _rates(rows.aggregate(**_counts()))
    p50, p95 = ttft_percentiles(rows).get(None, (None, None))
    totals.update(p50=p50, p95=p95)

    count = int(window.span / window.bucket)
    buckets = [Bucket(start=since + window.bucket * i) for i in range(count)]
    by_start = {b.start: b for b in buckets}
    series = rows.annotate(t=trunc("created_at")).values("t").order_by().annotate(**_counts())
    for row in series:
        bucket = by_start.get(_bucket_start(row["t"], since, window.bucket))
        if bucket is None:
            continue
        bucket.requests += row["requests"]
        bucket.errors += row["errors"]
        bucket.cancelled += row["cancelled"]
        bucket.ok += row["requests"] - row["errors"] - row["cancelled"]
        bucket.input_tokens += row["input_tokens"]
        bucket.output_tokens += row["output_tokens"]
    _bucket_percentiles(rows, buckets, since, window, trunc)

    by_model = [
        _rates(r)
        for r in rows.values("model").order_by().annotate(**_counts()).order_by("-requests")[:20]
    ]
    model_pct = ttft_percentiles(rows, "model")
    for r in by_model:
        r["p50"], r["p95"] = model_pct.get(r["model"], (None, None))

    by_key = [
        _rates(r)
        for r in rows.values("api_key_id", "key_prefix", name=F("api_key__name"))
        .order_by()
        .annotate(**_counts())
        .order_by("-requests")[:20]
    ]
    key_pct = ttft_percentiles(rows, "api_key_id")
    for r in by_key:
        r["p50"], r["p95"] = key_pct.get(r["api_key_id"], (None, None))
    return Dashboard(window, since, totals, buckets, by_model, by_key)


def _bucket_percentiles(rows, buckets, since, window, trunc) -> None:
    if window.bucket == timedelta(hours=1) or window.bucket == timedelta(days=1):
        # One database group per bucket.
        pct = ttft_percentiles(rows.annotate(t=trunc("created_at")), "t")
        for bucket in buckets:
            bucket.p50, bucket.p95 = pct.get(bucket.start, (None, None))
        return
    # Buckets of several hours: fold hourly samples (bounded) in Python.
    samples: dict[datetime, list[float]] = defaultdict(list)
    recent = (
        rows.filter(ttft_ms__isnull=False)
        .order_by("-created_at")
        .values_list("created_at", "ttft_ms")[:SAMPLE]
    )
    for stamp, value in recent:
        samples[_bucket_start(stamp, since, window.bucket)].append(value)
    for bucket in buckets:
        values = samples.get(bucket.start, [])
        bucket.p50, bucket.p95 = percentile(values, 0.5), percentile(values, 0.95)
