"""``usage_summary.summarize``: OpenAI-usage-API-shaped buckets from the
roll-ups (1h, 1d) or the raw rows (1m), grouped on demand, one
organisation's only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from responses_api.usage import writer as usage
from responses_api.usage.summary import summarize
from tests.usage.test_durability import a_row

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 10, tzinfo=UTC)
KEY_A, KEY_B = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


@pytest.fixture
def log(people):
    from accounts.models import ApiKey

    acme, globex = people["acme"], people["globex"]
    for key_id in (KEY_A, KEY_B):
        ApiKey.objects.create(
            id=key_id, organisation=acme, name=key_id[:4], prefix="sy_sk_x", key_hash=key_id
        )

    def at(minutes: float, **fields):
        return a_row(acme.id, created_at=(T0 + timedelta(minutes=minutes)).timestamp(), **fields)

    rows = [
        at(1, model="m1", api_key_id=KEY_A, input_tokens=10, output_tokens=5, ttft_ms=100.0),
        at(1.5, model="m1", api_key_id=KEY_A, input_tokens=20, cached_tokens=5, ttft_ms=300.0),
        at(2, model="m2", api_key_id=KEY_B, status=499, output_tokens=2, ttft_ms=50.0),
        at(70, model="m1", api_key_id=KEY_B, status=429, output_tokens=0),
        at(75, model="m2", api_key_id=KEY_A, status=502, output_tokens=0, cost="0.5"),
        at(60 * 24 + 5, model="m1", api_key_id=KEY_A, reasoning_tokens=3, cost="0.25"),
        a_row(globex.id, created_at=(T0 + timedelta(minutes=1)).timestamp()),
    ]
    assert usage.write_rows(rows) == []
    return acme


def test_hourly_buckets_have_the_usage_api_shape(log):
    buckets = summarize(
        log.id, start=T0, end=T0 + timedelta(hours=3), bucket_width="1h", group_by=[]
    )
    assert [b["start_time"] for b in buckets] == [
        int((T0 + timedelta(hours=h)).timestamp()) for h in range(3)
    ]
    assert all(b["object"] == "bucket" and b["end_time"] - b["start_time"] == 3600 for b in buckets)
    first, second, third = (b["results"] for b in buckets)
    assert third == []
    assert first == [
        {
            "object": "usage_summary",
            "requests": 3,
            "input_tokens": 30,
            "cached_tokens": 5,
            "output_tokens": 14,  # a_row's 7 twice, and 2
            "reasoning_tokens": 0,
            "cost": 0.0,
            "cancelled": 1,
            "errors": 0,
            "ttft_p50_ms": pytest.approx(first[0]["ttft_p50_ms"]),
            "ttft_p95_ms": pytest.approx(first[0]["ttft_p95_ms"]),
        }
    ]
    # Raw p50 is 100 ms, p95 280 ms (between 100 and 300): each within
    # the width of the buckets holding them.
    assert 100 <= first[0]["ttft_p50_ms"] < 150 and 200 <= first[0]["ttft_p95_ms"] < 500
    assert second[0]["requests"] == 2 and second[0]["errors"] == 2 and second[0]["cost"] == 0.5
    assert second[0]["ttft_p50_ms"] is None


def test_grouping_names_the_groups(log):
    (bucket,) = summarize(
        log.id,
        start=T0,
        end=T0 + timedelta(hours=1),
        bucket_width="1h",
        group_by=["model", "key", "status"],
    )
    cells = {
        (r["model"], r["api_key_id"], r["status_class"]): r["requests"] for r in bucket["results"]
    }
    assert cells == {("m1", KEY_A, "2xx"): 2, ("m2", KEY_B, "499"): 1}
    assert all("backend_id" not in r for r in bucket["results"])
    (by_backend,) = summarize(
        log.id, start=T0, end=T0 + timedelta(hours=1), bucket_width="1h", group_by=["backend"]
    )
    assert [r["backend_id"] for r in by_backend["results"]] == [None]


def test_daily_and_minute_buckets_agree_with_hourly(log):
    days = summarize(log.id, start=T0, end=T0 + timedelta(days=2), bucket_width="1d")
    assert [sum(r["requests"] for r in d["results"]) for d in days] == [5, 1, 0]
    assert days[0]["start_time"] == int(datetime(2026, 5, 1, tzinfo=UTC).timestamp())
    assert days[1]["results"][0]["reasoning_tokens"] == 3 and days[1]["results"][0]["cost"] == 0.25
    minutes = summarize(
        log.id, start=T0, end=T0 + timedelta(hours=2), bucket_width="1m", group_by=["status"]
    )
    assert len(minutes) == 120
    busy = {b["start_time"]: b["results"] for b in minutes if b["results"]}
    assert [r["requests"] for r in busy[int((T0 + timedelta(minutes=1)).timestamp())]] == [2]
    assert busy[int((T0 + timedelta(minutes=2)).timestamp())][0]["status_class"] == "499"
    hours = summarize(log.id, start=T0, end=T0 + timedelta(hours=2), bucket_width="1h")
    for field in ("requests", "input_tokens", "output_tokens", "cancelled", "errors", "cost"):
        assert sum(r[field] for b in minutes for r in b["results"]) == sum(
            r[field] for b in hours for r in b["results"]
        ), field
    first_hour = [r for b in minutes[:60] for r in b["results"]]
    assert sum(r["cancelled"] for r in first_hour) == 1


def test_another_organisations_usage_is_not_summarised(log, people):
    globex = people["globex"]
    (bucket,) = summarize(globex.id, start=T0, end=T0 + timedelta(hours=1), bucket_width="1h")
    assert [r["requests"] for r in bucket["results"]] == [1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bucket_width": "5m"}, "bucket_width"),
        ({"group_by": ["project"]}, "Cannot group by 'project'"),
        ({"start": T0.replace(tzinfo=None)}, "aware"),
        ({"end": T0 - timedelta(hours=1)}, "after start"),
        ({"bucket_width": "1m", "end": T0 + timedelta(days=30)}, "At most"),
    ],
)
def test_bad_arguments_are_refused(log, kwargs, message):
    args = {"start": T0, "end": T0 + timedelta(hours=1), "bucket_width": "1h", "group_by": []}
    with pytest.raises(ValueError, match=message):
        summarize(log.id, **{**args, **kwargs})


def test_histogram_quantiles_stay_within_a_bucket_of_the_exact_percentile():
    import random

    from console.stats import percentile
    from responses_api.runtime import histogram

    rng = random.Random(7)
    for _ in range(200):
        values = [rng.lognormvariate(5.5, 1.2) for _ in range(rng.randint(1, 400))]
        counts = histogram.counts_of(values)
        for fraction in (0.5, 0.95):
            exact = percentile(values, fraction)
            estimate = histogram.quantile(counts, fraction)
            low = histogram.bucket_bounds(histogram.bucket_of(exact))[0]
            high = histogram.bucket_bounds(histogram.bucket_of(exact))[1] or low
            width = high - low
            assert abs(estimate - exact) <= 2 * width, (fraction, exact, estimate)
