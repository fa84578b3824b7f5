"""``usage/summary``: time buckets from the roll-ups, shaped like OpenAI's usage API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.admin_api.conftest import ADMIN, error_of, usage_row

pytestmark = pytest.mark.django_db

HOUR = 3600


@pytest.fixture
def hours(estates):
    """Rows in two whole hours, three and two hours ago (UTC), in Acme; one in
    Globex. (The estates' own rows, five minutes old, fall after them.)"""
    acme, globex = estates["acme"], estates["globex"]
    top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    first, second = top - timedelta(hours=3), top - timedelta(hours=2)
    org = acme.key.organisation
    for minute, status, model in ((5, 200, "sim-model"), (10, 499, "sim-model"), (20, 502, "b")):
        usage_row(
            org,
            status=status,
            model=model,
            api_key=acme.key,
            input_tokens=100,
            output_tokens=10,
            created_at=first + timedelta(minutes=minute),
        )
    usage_row(org, api_key=acme.key, input_tokens=7, created_at=second + timedelta(minutes=1))
    usage_row(globex.key.organisation, input_tokens=1000, created_at=first + timedelta(minutes=1))
    return int(first.timestamp()), int(second.timestamp())


def test_hourly_buckets_count_what_the_rows_hold(api, hours):
    first, second = hours
    answer = api().get(
        f"{ADMIN}/usage/summary",
        {"start_time": first, "end_time": second + HOUR, "bucket_width": "1h"},
    )
    assert answer.status_code == 200, answer.content
    page = answer.json()
    assert page["object"] == "page" and page["has_more"] is False and page["next_page"] is None
    one, two = page["data"]
    assert (one["object"], one["start_time"], one["end_time"]) == ("bucket", first, second)
    (result,) = one["results"]
    assert result["requests"] == 3
    assert result["input_tokens"] == 300 and result["output_tokens"] == 30
    assert result["cancelled"] == 1 and result["errors"] == 1
    assert two["results"][0]["requests"] == 1 and two["results"][0]["input_tokens"] == 7


def test_grouped_by_model_and_status(api, hours):
    first, _ = hours
    answer = api().get(
        f"{ADMIN}/usage/summary",
        {"start_time": first, "end_time": first + HOUR, "bucket_width": "1h", "group_by": "model"},
    )
    results = answer.json()["data"][0]["results"]
    assert {(r["model"], r["requests"]) for r in results} == {("b", 1), ("sim-model", 2)}
    both = api().get(
        f"{ADMIN}/usage/summary?start_time={first}&end_time={first + HOUR}&bucket_width=1h"
        "&group_by=model&group_by=status"
    )
    classes = {(r["model"], r["status_class"]) for r in both.json()["data"][0]["results"]}
    assert classes == {("sim-model", "2xx"), ("sim-model", "499"), ("b", "5xx")}


def test_pages_of_buckets_follow_one_another(api, hours):
    first, second = hours
    query = {"start_time": first, "end_time": second + HOUR, "bucket_width": "1h", "limit": 1}
    one = api().get(f"{ADMIN}/usage/summary", query).json()
    assert one["has_more"] is True and [b["start_time"] for b in one["data"]] == [first]
    two = api().get(f"{ADMIN}/usage/summary", {**query, "page": one["next_page"]}).json()
    assert [b["start_time"] for b in two["data"]] == [second] and two["has_more"] is False


def test_another_organisations_rows_are_not_counted(api, hours):
    first, _ = hours
    answer = api("globex").get(
        f"{ADMIN}/usage/summary",
        {"start_time": first, "end_time": first + HOUR, "bucket_width": "1h"},
    )
    (result,) = answer.json()["data"][0]["results"]
    assert result["requests"] == 1 and result["input_tokens"] == 1000


@pytest.mark.parametrize(
    "query, param",
    [
        ({}, "start_time"),
        ({"start_time": "soon"}, "start_time"),
        ({"start_time": 10, "bucket_width": "1w"}, "bucket_width"),
        ({"start_time": 10, "group_by": "project"}, "group_by"),
        ({"start_time": 10, "end_time": 5}, "end_time"),
        ({"start_time": 10, "limit": 0}, "limit"),
    ],
)
def test_bad_parameters_are_named(api, hours, query, param):
    answer = api().get(f"{ADMIN}/usage/summary", query)
    assert answer.status_code == 400
    assert error_of(answer)["param"].split(".")[0].split("[")[0] == param


def test_a_viewer_reads_it(api, hours):
    first, _ = hours
    answer = api("acme_viewer").get(f"{ADMIN}/usage/summary", {"start_time": first})
    assert answer.status_code == 200
