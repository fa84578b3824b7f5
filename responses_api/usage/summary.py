"""Usage in time buckets, in the shape of OpenAI's usage API, from the roll-ups.

:func:`summarize` is what the management API's ``usage/summary`` and the
console's dashboard read. Hourly and daily buckets come from the roll-up
tables (``responses_api/usage/rollups.py``), so their cost does not grow with the
log. One-minute buckets are finer than any roll-up: they are aggregated from
the raw rows, through the ``(organisation, created_at)`` index, so keep their
range short (at most :data:`MAX_BUCKETS` buckets, a week of minutes).

Times are UTC. ``start`` is rounded down and ``end`` up to whole buckets;
every bucket of the range is listed, empty ones with no results. TTFT
percentiles come from the fixed-edge histograms (``responses_api/histogram``)
and are exact to within the width of the bucket they fall in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Case, Count, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce, Trunc

from responses_api.models import NO_ID, UsageDaily, UsageHourly, UsageLog
from responses_api.runtime import histogram
from responses_api.usage.rollups import MEASURES, cost_nanos

WIDTHS = {"1m": timedelta(minutes=1), "1h": timedelta(hours=1), "1d": timedelta(days=1)}
GROUPS = {
    "model": "model",
    "key": "api_key_id",
    "backend": "backend_id",
    "status": "status_class",
}
MAX_BUCKETS = 7 * 24 * 60


@dataclass
class Sums:
    """One group's sums: measures as in the roll-up, plus cancellations and
    the TTFT histogram."""

    dims: dict[str, Any]
    requests: int = 0
    errors: int = 0
    cancelled: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_nanos: int = 0
    ttft: list[int] = field(default_factory=lambda: [0] * histogram.BUCKETS)

    def add(self, other: Sums) -> None:
        for name in (*MEASURES, "cancelled"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.ttft = [a + b for a, b in zip(self.ttft, other.ttft, strict=True)]

    @property
    def cost(self) -> float:
        return self.cost_nanos / 1e9

    def p(self, fraction: float) -> float | None:
        return histogram.quantile(self.ttft, fraction)


def _floor(stamp: datetime, width: timedelta) -> datetime:
    stamp = stamp.astimezone(UTC)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + width * math.floor((stamp - epoch) / width)


def _ceil(stamp: datetime, width: timedelta) -> datetime:
    floor = _floor(stamp, width)
    return floor if floor == stamp else floor + width


def _rollup_sums() -> dict[str, Any]:
    # Named apart from the columns they sum (Django refuses a clash).
    sums: dict[str, Any] = {f"s_{name}": Coalesce(Sum(name), 0) for name in MEASURES}
    sums["s_cancelled"] = Coalesce(Sum("requests", filter=Q(status_class="499")), 0)
    sums.update({f"s_{name}": Coalesce(Sum(name), 0) for name in histogram.COLUMNS})
    return sums


def _raw_sums() -> dict[str, Any]:
    """The roll-up's sums computed from raw rows (cost is summed as a
    decimal and converted below)."""
    sums: dict[str, Any] = {
        "s_requests": Count("id"),
        "s_errors": Count("id", filter=Q(status__gte=400) & ~Q(status=499)),
        "s_cancelled": Count("id", filter=Q(status=499)),
        "s_input_tokens": Coalesce(Sum("input_tokens"), 0),
        "s_cached_tokens": Coalesce(Sum("cached_tokens"), 0),
        "s_output_tokens": Coalesce(Sum("output_tokens"), 0),
        "s_reasoning_tokens": Coalesce(Sum("reasoning_tokens"), 0),
        "s_cost": Sum("cost"),
    }
    for index, name in enumerate(histogram.COLUMNS):
        low, high = histogram.bucket_bounds(index)
        bounds = Q(ttft_ms__lt=high) if high is not None else Q()
        if index:
            bounds &= Q(ttft_ms__gte=low)
        else:
            bounds &= Q(ttft_ms__isnull=False)
        sums[f"s_{name}"] = Count("id", filter=bounds)
    return sums


_STATUS_CLASS = Case(
    When(status=429, then=Value("429")),
    When(status=499, then=Value("499")),
    When(status__gte=500, then=Value("5xx")),
    When(status__gte=400, then=Value("4xx")),
    default=Value("2xx"),
)


def _sums_of(row: dict[str, Any], dims: Sequence[str]) -> Sums:
    sums = Sums(dims={name: row[name] for name in dims})
    for name in (*MEASURES, "cancelled"):
        if f"s_{name}" in row:
            setattr(sums, name, int(row[f"s_{name}"] or 0))
    if "s_cost" in row:
        sums.cost_nanos = cost_nanos(row["s_cost"])
    sums.ttft = [int(row[f"s_{name}"] or 0) for name in histogram.COLUMNS]
    return sums


def rollup_sums(
    organisation_id: int,
    *,
    start: datetime,
    end: datetime,
    width: str,
    by: Sequence[str] = (),
    also: Sequence[tuple[datetime, datetime]] = (),
) -> list[Sums]:
    """Sums over ``[start, end)`` (and the roll-up ranges ``also``) per
    combination of the columns ``by`` (``bucket_start`` and the roll-up's
    dimensions), from the hourly (``width="1h"``) or daily (``"1d"``)
    roll-up, or the raw rows (``"1m"``; ``bucket_start`` is then the minute)."""
    dims = list(by)
    queryset: QuerySet
    if width == "1m":
        aliases: dict[str, Any] = {}
        if "bucket_start" in dims:
            aliases["bucket_start"] = Trunc("created_at", "minute", tzinfo=UTC)
        if "status_class" in dims:
            aliases["status_class"] = _STATUS_CLASS
        queryset = UsageLog.objects.filter(
            organisation_id=organisation_id, created_at__gte=start, created_at__lt=end
        ).annotate(**aliases)
        sums = _raw_sums()
    else:
        table = UsageDaily if width == "1d" else UsageHourly
        within = Q(bucket_start__gte=start, bucket_start__lt=end)
        for also_start, also_end in also:
            within |= Q(bucket_start__gte=also_start, bucket_start__lt=also_end)
        queryset = table.objects.filter(within, organisation_id=organisation_id)
        sums = _rollup_sums()
    if dims:
        rows: Iterable[dict[str, Any]] = queryset.values(*dims).order_by().annotate(**sums)
    else:
        rows = [queryset.aggregate(**sums)]
    return [_sums_of(row, dims) for row in rows if row["s_requests"]]


def span_sums(
    organisation_id: int, *, start: datetime, end: datetime, by: Sequence[str] = ()
) -> list[Sums]:
    """Sums over ``[start, end)`` (whole hours) per combination of ``by``
    (not ``bucket_start``), read from the daily cells of the whole UTC days
    inside the span and the hourly cells of the hours around them: a week
    costs six days of cells and 24 hours of them, not 168 hours."""
    day = WIDTHS["1d"]
    first_day, last_day = _ceil(start, day), _floor(end, day)
    if last_day <= first_day:
        return rollup_sums(organisation_id, start=start, end=end, width="1h", by=by)
    parts = rollup_sums(organisation_id, start=first_day, end=last_day, width="1d", by=by)
    edges = [(a, b) for a, b in ((start, first_day), (last_day, end)) if a < b]
    if edges:
        parts += rollup_sums(
            organisation_id, start=edges[0][0], end=edges[0][1], width="1h", by=by, also=edges[1:]
        )
    merged: dict[tuple, Sums] = {}
    for sums in parts:
        key = tuple(sums.dims[name] for name in by)
        if key in merged:
            merged[key].add(sums)
        else:
            merged[key] = sums
    return list(merged.values())


def _id(value: Any) -> str | None:
    if value is None or value == NO_ID:
        return None
    return str(value)


def _result(sums: Sums, group_by: Sequence[str]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "object": "usage_summary",
        "requests": sums.requests,
        "input_tokens": sums.input_tokens,
        "cached_tokens": sums.cached_tokens,
        "output_tokens": sums.output_tokens,
        "reasoning_tokens": sums.reasoning_tokens,
        "cost": sums.cost,
        "cancelled": sums.cancelled,
        "errors": sums.errors,
        "ttft_p50_ms": sums.p(0.5),
        "ttft_p95_ms": sums.p(0.95),
    }
    for group in group_by:
        column = GROUPS[group]
        value = sums.dims[column]
        result[column] = _id(value) if column.endswith("_id") else value
    return result


def summarize(
    organisation_id: int,
    *,
    start: datetime,
    end: datetime,
    bucket_width: str,
    group_by: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """``[{"object": "bucket", "start_time", "end_time", "results": [...]}]``
    for one organisation, oldest bucket first. ``group_by`` names any of
    ``model``, ``key``, ``backend``, ``status``; each result then carries
    ``model``, ``api_key_id``, ``backend_id``, ``status_class``
    respectively. Raises ``ValueError`` for an unknown width or group, a
    naive or reversed range, or too many buckets."""
    width = WIDTHS.get(bucket_width)
    if width is None:
        raise ValueError(f"bucket_width must be one of {', '.join(WIDTHS)}.")
    unknown = [g for g in group_by if g not in GROUPS]
    if unknown:
        raise ValueError(f"Cannot group by {unknown[0]!r}: use {', '.join(GROUPS)}.")
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("start and end must be aware datetimes.")
    first, stop = _floor(start, width), _ceil(end, width)
    if stop <= first:
        raise ValueError("end must be after start.")
    count = int((stop - first) / width)
    if count > MAX_BUCKETS:
        raise ValueError(f"At most {MAX_BUCKETS} buckets of {bucket_width}; narrow the range.")
    groups = list(dict.fromkeys(group_by))
    columns = [GROUPS[g] for g in groups]
    found: dict[datetime, list[Sums]] = {}
    for sums in rollup_sums(
        organisation_id, start=first, end=stop, width=bucket_width, by=["bucket_start", *columns]
    ):
        found.setdefault(sums.dims["bucket_start"].astimezone(UTC), []).append(sums)
    buckets = []
    for i in range(count):
        bucket_start = first + width * i
        cells = sorted(
            found.get(bucket_start, []), key=lambda s: tuple(str(s.dims[c]) for c in columns)
        )
        buckets.append(
            {
                "object": "bucket",
                "start_time": int(bucket_start.timestamp()),
                "end_time": int((bucket_start + width).timestamp()),
                "results": [_result(s, groups) for s in cells],
            }
        )
    return buckets
