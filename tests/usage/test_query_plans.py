"""On PostgreSQL, every filter of the console's usage log reads its rows
through an index in order (no sort of the whole log, no count, no offset),
checked with ``EXPLAIN`` on a table of 200,000 rows with a realistic mix,
analysed, with the planner's settings left alone."""

from __future__ import annotations

import io
import json
import random
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import ApiKey
from console.usage import usage_filter, usage_page
from responses_api.models import Backend, UsageLog

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="query plans are PostgreSQL's: set DATABASE_URL"
    ),
]

ROWS = 200_000
# The columns each row sets; the plans depend on these.
VARIED = (
    "request_id",
    "organisation_id",
    "api_key_id",
    "model",
    "backend_id",
    "stream",
    "status",
    "endpoint",
    "created_at",
)
# The other NOT NULL columns (``COPY`` knows no Django default), the same
# in every row: the model's default, or a value a real row would have.
CONSTANT_FIELDS = [
    f
    for f in UsageLog._meta.concrete_fields
    if not f.null and not f.primary_key and f.attname not in VARIED
]
REALISTIC = {
    "key_prefix": "sy_sk_",
    "backend_name": "gpu",
    "input_tokens": 10,
    "output_tokens": 5,
    "attempts": 1,
    "user_agent": "t/1",
}


def _copy_text(value: object) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    return json.dumps(value) if isinstance(value, list) else str(value)


CONSTANT_COLUMNS = [f.attname for f in CONSTANT_FIELDS]
CONSTANT = tuple(_copy_text(REALISTIC.get(f.attname, f.get_default())) for f in CONSTANT_FIELDS)
STATUSES = (200, 400, 404, 429, 499, 500, 502, 503)
SESSION = "019a2b7c-5d1e-7f00-9c3a-codex-session"
WEIGHTS = (910, 20, 5, 30, 25, 3, 4, 3)


@pytest.fixture
def big_log(people):
    acme, globex = people["acme"], people["globex"]
    keys = [
        ApiKey.objects.create(organisation=acme, name=f"k{i}", prefix="sy_sk_", key_hash=f"h{i}")
        for i in range(10)
    ]
    backends = [
        Backend.objects.create(organisation=acme, name=f"gpu{i}", base_url="http://x/v1")
        for i in range(3)
    ]
    rng = random.Random(3)
    now = timezone.now()
    lines = io.StringIO()
    for i in range(ROWS):
        org = globex if i % 50 == 0 else acme
        created = now - timedelta(days=30) * (1 - i / ROWS)
        status = rng.choices(STATUSES, WEIGHTS)[0]
        lines.write(
            "\t".join(
                (
                    str(uuid.uuid4()),
                    str(org.id),
                    str(rng.choices(keys, [1 / (k + 1) for k in range(10)])[0].id),
                    rng.choices(("m1", "m2", "m3", "m4"), (45, 25, 20, 10))[0],
                    str(backends[i % 3].id),
                    "t" if rng.random() < 0.7 else "f",
                    str(status),
                    "/v1/responses",
                    created.isoformat(),
                    *CONSTANT,
                )
            )
            + "\n"
        )
    with connection.cursor() as cursor:
        with cursor.cursor.copy(
            "COPY responses_api_usagelog (request_id, organisation_id, api_key_id, model, "
            "backend_id, stream, status, endpoint, created_at, "
            + ", ".join(CONSTANT_COLUMNS)
            + ") FROM STDIN"
        ) as copy:
            copy.write(lines.getvalue())
        # One Codex session of 400 turns, spread over the month.
        cursor.execute(
            "UPDATE responses_api_usagelog SET session_id = %s WHERE id %% 500 = 0",
            [SESSION],
        )
        cursor.execute("ANALYZE responses_api_usagelog")
    return {"org": acme, "key": keys[4], "backend": backends[1]}


FILTERS = [
    ({}, "usage_org_time"),
    ({"key": "key"}, "usage_org_key"),
    ({"model": "m4"}, "usage_org_model"),
    ({"backend": "backend"}, "usage_org_backend"),
    # Nine rows in ten are 200s: reading the time index and skipping the
    # others is the planner's right choice there, and ours.
    ({"status": "200"}, ("usage_org_status", "usage_org_time")),
    ({"status": "429"}, "usage_org_status"),
    ({"status": "499"}, "usage_org_status"),
    ({"status": "4xx"}, "usage_org_4xx"),
    ({"status": "5xx"}, "usage_org_5xx"),
    ({"stream": "no"}, "usage_org_stream"),
    ({"range": "1h"}, "usage_org_time"),
    ({"range": "7d"}, "usage_org_time"),
    ({"session": "SESSION"}, "usage_org_session"),
]


def full_sort(plan: str) -> bool:
    """A plan node sorting its whole input (not an incremental sort)."""
    return any(
        line.strip().lstrip("->").strip().startswith("Sort  (") for line in plan.splitlines()
    )


def bounded_by_time(plan: str) -> bool:
    return any(
        "Index Cond" in line and "created_at >=" in line or "created_at >" in line
        for line in plan.splitlines()
        if "Index Cond" in line
    )


def _data(big_log, spec: dict) -> dict:
    data = dict(spec)
    if "key" in data:
        data["key"] = str(big_log["key"].id)
    if "backend" in data:
        data["backend"] = str(big_log["backend"].id)
    if "session" in data:
        data["session"] = SESSION
    return data


def _plans(queryset) -> list[str]:
    """The plans of the queries of a first, an older and a newer page."""
    with CaptureQueriesContext(connection) as captured:
        first = usage_page(queryset)
        if first.older:
            older = usage_page(queryset, before=first.older)
            if older.newer:
                usage_page(queryset, after=older.newer)
    plans = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            assert "COUNT(" not in sql.upper() and "OFFSET" not in sql.upper(), sql
            cursor.execute("EXPLAIN " + sql)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans


@pytest.mark.parametrize(("spec", "index"), FILTERS)
def test_each_filter_of_the_usage_log_reads_its_own_index(big_log, spec, index):
    queryset = usage_filter(
        UsageLog.objects.filter(organisation=big_log["org"]), _data(big_log, spec)
    )
    plans = _plans(queryset)
    assert len(plans) >= 3
    for plan in plans:
        assert any(name in plan for name in ((index,) if isinstance(index, str) else index)), plan
        assert "Seq Scan" not in plan, plan
        # Rows come in index order (at most an incremental sort on the id
        # tie-break), or a sort of only the rows an index range bounds by time
        # (the planner's choice for the few rows newer than a recent cursor).
        assert not full_sort(plan) or bounded_by_time(plan), plan


def test_combined_filters_and_a_time_window_use_an_index(big_log):
    now = timezone.now()
    data = _data(big_log, {"key": "key", "status": "499", "range": "7d"})
    for queryset in (
        usage_filter(UsageLog.objects.filter(organisation=big_log["org"]), data),
        usage_filter(
            UsageLog.objects.filter(organisation=big_log["org"]),
            {"since": now - timedelta(days=12), "until": now - timedelta(days=11)},
        ),
    ):
        for plan in _plans(queryset):
            assert "Index" in plan and "Seq Scan" not in plan, plan


def test_the_csv_export_reads_the_log_in_index_order(big_log):
    """The export's server-side cursor is planned for its first rows: the
    rows come off the time index, without a join or a sort of the whole log
    before the first of them."""
    from responses_api.usage.export import _ROW_COLUMNS

    queryset = (
        UsageLog.objects.filter(organisation=big_log["org"])
        .order_by("-created_at", "-id")
        .values_list(*_ROW_COLUMNS)
    )
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN DECLARE export NO SCROLL CURSOR FOR " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "usage_org_time" in plan and "Seq Scan" not in plan, plan
    assert "Join" not in plan and not full_sort(plan), plan
