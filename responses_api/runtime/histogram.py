"""Time-to-first-token histograms with fixed edges, so that counts add up.

A roll-up keeps, per cell, how many requests had their first token in each
bucket. Counts of the same bucket add across hours, keys and models, so any
p50/p95 the console or the management API asks for is read from summed
counts, never from raw rows, and is exact to within the width of the bucket
it falls in (the edges step by at most 5/3, so within that factor).

Pure functions, no Django: the roll-up writer, the dashboard and the usage
summary share them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

# Upper edges in ms of every bucket but the last: bucket 0 is [0, 1),
# bucket i is [EDGES[i-1], EDGES[i]), the last is [600 s, ∞).
EDGES_MS: tuple[float, ...] = (
    1, 2, 3, 5, 7,
    10, 15, 20, 30, 50, 70,
    100, 150, 200, 300, 500, 700,
    1_000, 1_500, 2_000, 3_000, 5_000, 7_000,
    10_000, 15_000, 20_000, 30_000, 50_000, 70_000,
    100_000, 150_000, 200_000, 300_000, 600_000,
)  # fmt: skip
BUCKETS = len(EDGES_MS) + 1
COLUMNS = tuple(f"ttft_{i:02d}" for i in range(BUCKETS))


def bucket_of(ttft_ms: float) -> int:
    """The bucket a time to first token falls in (negative values in the first)."""
    return bisect.bisect_right(EDGES_MS, ttft_ms)


def bucket_bounds(index: int) -> tuple[float, float | None]:
    """``[low, high)`` of a bucket in ms; the last bucket has no upper edge."""
    low = 0.0 if index == 0 else float(EDGES_MS[index - 1])
    high = float(EDGES_MS[index]) if index < len(EDGES_MS) else None
    return low, high


def quantile(counts: Sequence[int], fraction: float) -> float | None:
    """The ``fraction`` quantile of the values counted, as ``percentile_cont``
    computes it (interpolating between the values at the ranks either side),
    each value placed evenly inside its bucket. So the answer is off by at
    most the width of the bucket(s) holding those ranks. The last, open
    bucket places its values at its lower edge. None when nothing was
    counted."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = fraction * (total - 1)
    below = math.floor(rank)
    low_value = _value_at(counts, below)
    if rank == below:
        return low_value
    return low_value + (_value_at(counts, below + 1) - low_value) * (rank - below)


def _value_at(counts: Sequence[int], rank: int) -> float:
    """Where the ``rank``-th smallest value (from 0) sits, spreading each
    bucket's values evenly over it."""
    seen = 0
    for index, count in enumerate(counts):
        if rank < seen + count:
            low, high = bucket_bounds(index)
            if high is None:
                return low
            return low + (high - low) * (rank - seen + 0.5) / count
        seen += count
    return bucket_bounds(len(counts) - 1)[0]


def counts_of(values: Sequence[float | None]) -> list[int]:
    """A histogram of the values given (None values are not counted)."""
    counts = [0] * BUCKETS
    for value in values:
        if value is not None:
            counts[bucket_of(value)] += 1
    return counts
