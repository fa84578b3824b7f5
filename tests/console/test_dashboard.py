"""Dashboard numbers come from the usage roll-ups; charts are inline SVG."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from console.stats import percentile
from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db


def test_percentile_interpolates_like_percentile_cont():
    assert percentile([], 0.5) is None
    assert percentile([10.0], 0.95) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile(list(map(float, range(1, 101))), 0.95) == pytest.approx(95.05)


def test_totals_rates_and_percentiles(as_user, crew, estates):
    acme = crew["acme"]
    for ttft in (100.0, 200.0, 300.0, 400.0):
        usage_row(acme, ttft_ms=ttft, api_key=estates["acme"].key, input_tokens=5, output_tokens=5)
    usage_row(acme, status=500, ttft_ms=None, input_tokens=0, output_tokens=0)
    usage_row(acme, status=499, ttft_ms=None, input_tokens=0, output_tokens=0)
    usage_row(acme, created_at=timezone.now() - timedelta(days=3))  # outside 24 h
    # estates["acme"].row: one more 200 with ttft 120 ms, 10 + 20 tokens.
    response = as_user("dave").get(reverse("console:dashboard"))
    totals = response.context["data"].totals
    assert totals["requests"] == 7
    assert totals["errors"] == 1 and totals["cancelled"] == 1
    assert totals["error_rate"] == pytest.approx(1 / 7)
    assert totals["tokens"] == 4 * 10 + 30
    # Exact to a histogram bucket: raw p50 200 ms lies in [200, 300),
    # raw p95 380 ms in [300, 500).
    assert 150.0 <= totals["p50"] < 300.0
    assert 300.0 <= totals["p95"] < 500.0
    body = response.content.decode()
    assert body.count("<svg") == 4
    week = as_user("dave").get(reverse("console:dashboard"), {"range": "7d"}).context["data"]
    assert week.totals["requests"] == 8 and len(week.buckets) == 28
    assert sum(b.requests for b in week.buckets) == 8
    month = as_user("dave").get(reverse("console:dashboard"), {"range": "30d"}).context["data"]
    assert len(month.buckets) == 30 and sum(b.requests for b in month.buckets) == 8


def test_per_model_and_per_key_tables(as_user, crew, estates):
    acme = crew["acme"]
    usage_row(acme, model="big-model", ttft_ms=900.0)
    data = as_user("bob").get(reverse("console:dashboard")).context["data"]
    models = {r["model"]: r for r in data.by_model}
    assert models["big-model"]["requests"] == 1 and 700.0 <= models["big-model"]["p50"] < 1000.0
    keys = {r["api_key_id"]: r for r in data.by_key}
    assert keys[estates["acme"].key.id]["requests"] == 1
    assert keys[estates["acme"].key.id]["name"] == "acme key"


def test_an_empty_dashboard_renders(as_user, crew):
    response = as_user("alice").get(reverse("console:dashboard"), {"range": "30d"})
    assert response.status_code == 200
    assert "No requests in this period." in response.content.decode()


def test_chart_axes_use_round_steps():
    from console.charts import _nice_max

    assert _nice_max(0) == 4
    assert _nice_max(3) == 4
    assert _nice_max(5) == 8
    assert _nice_max(62) == 80
    assert _nice_max(390) == 400
    assert _nice_max(0.25) == pytest.approx(0.4)


def test_chart_labels_are_escaped():
    from console.charts import Series, stacked_bars

    svg = stacked_bars(["<b>"], [Series("<script>", "s1", [3])], title="t")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
