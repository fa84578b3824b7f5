"""The usage log: filters, pagination, and a CSV export that streams."""

import csv
import io
import re
import tracemalloc
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from responses_api.models import UsageLog
from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def variety(estates, crew):
    acme = crew["acme"]
    key = estates["acme"].key
    rows = {
        "ok": estates["acme"].row,
        "bad_request": usage_row(acme, status=400, error_code="invalid_request_error"),
        "limited": usage_row(acme, status=429, error_code="rate_limit_exceeded", api_key=key),
        "cancelled": usage_row(acme, status=499, note="Client disconnected", stream=True),
        "failed": usage_row(acme, status=502, model="other-model"),
        "old": usage_row(acme, created_at=timezone.now() - timedelta(days=10)),
    }
    return rows


def _ids(response):
    return {row.request_id for row in response.context["page"]}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status": "200"}, {"ok", "old"}),
        ({"status": "4xx"}, {"bad_request", "limited"}),
        ({"status": "429"}, {"limited"}),
        ({"status": "499"}, {"cancelled"}),
        ({"status": "5xx"}, {"failed"}),
        ({"model": "other-model"}, {"failed"}),
        ({"stream": "yes"}, {"cancelled"}),
        ({"range": "24h", "status": "200"}, {"ok"}),
    ],
)
def test_filters_select_the_matching_rows(as_user, variety, query, expected):
    response = as_user("dave").get(reverse("console:usage"), query)
    assert _ids(response) == {variety[name].request_id for name in expected}


def test_filter_by_key_backend_request_id_and_time(as_user, variety, estates):
    client = as_user("bob")
    key = estates["acme"].key
    assert _ids(client.get(reverse("console:usage"), {"key": str(key.id)})) == {
        variety["ok"].request_id,
        variety["limited"].request_id,
    }
    by_backend = client.get(reverse("console:usage"), {"backend": str(estates["acme"].backend.id)})
    assert _ids(by_backend) == {variety["ok"].request_id}
    rid = variety["cancelled"].request_id
    assert _ids(client.get(reverse("console:usage"), {"request_id": str(rid)})) == {rid}
    since = (timezone.now() - timedelta(days=11)).strftime("%Y-%m-%dT%H:%M")
    until = (timezone.now() - timedelta(days=9)).strftime("%Y-%m-%dT%H:%M")
    window = client.get(reverse("console:usage"), {"since": since, "until": until})
    assert _ids(window) == {variety["old"].request_id}


def test_a_malformed_filter_says_so_and_shows_nothing(as_user, variety):
    response = as_user("bob").get(reverse("console:usage"), {"request_id": "nope"})
    assert response.status_code == 200
    assert "A request id is a UUID." in response.content.decode()
    assert _ids(response) == set()


def test_htmx_filtering_returns_only_the_rows(as_user, variety):
    response = as_user("bob").get(
        reverse("console:usage"), {"status": "499"}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert "<html" not in body and str(variety["cancelled"].request_id) in body
    assert 'id="export-csv"' in body and "status=499" in body


def test_each_row_names_its_endpoint(as_user, crew):
    acme = crew["acme"]
    usage_row(acme, endpoint="/responses/compact", model="compacted-model")
    usage_row(acme, endpoint="/responses/resp_0123abcd", method="GET", model="")
    usage_row(acme, endpoint="/conversations", model="")
    body = as_user("bob").get(reverse("console:usage")).content.decode()
    head, rows = body.split("<tbody>")
    assert "<th>Endpoint</th>" in head
    cells = re.findall(r'<td class="small endpoint"><span [^>]*>([^<]*)</span></td>', rows)
    assert {"/responses/compact", "GET /responses/resp_0123abcd", "/conversations"} <= set(cells)


def _cursor(response, rel: str) -> dict:
    page = response.context["page"]
    value = page.older if rel == "older" else page.newer
    return {"before": value} if rel == "older" else {"after": value}


def test_pages_hold_fifty_rows_and_walk_older_and_newer(as_user, crew):
    """Keyset pages: no count, no offset; "Older" and "Newer" walk the log
    by (created_at, id), rows with the same time included exactly once."""
    now = timezone.now()
    for i in range(120):
        # Pairs of rows share a timestamp, to exercise the id tie-break.
        usage_row(crew["acme"], created_at=now - timedelta(seconds=i // 2))
    client = as_user("bob")
    url = reverse("console:usage")
    first = client.get(url)
    assert first.context["page"].first and first.context["page"].newer is None
    assert "rows" not in first.content.decode().split('class="pagination"')[1][:200]
    second = client.get(url, _cursor(first, "older"))
    third = client.get(url, _cursor(second, "older"))
    sizes = [len(r.context["page"]) for r in (first, second, third)]
    assert sizes == [50, 50, 20]
    assert third.context["page"].older is None
    seen = [row.request_id for r in (first, second, third) for row in r.context["page"]]
    assert len(seen) == len(set(seen)) == 120
    times = [row.created_at for r in (first, second, third) for row in r.context["page"]]
    assert times == sorted(times, reverse=True)
    # Newer from the third page is the second page again, then the first.
    back = client.get(url, _cursor(third, "newer"))
    assert _ids(back) == _ids(second)
    assert _ids(client.get(url, _cursor(back, "newer"))) == _ids(first)
    body = second.content.decode()
    assert "← Newer" in body and "Older →" in body and "Newest" in body


def test_pages_keep_the_filter(as_user, crew):
    now = timezone.now()
    for i in range(140):
        usage_row(crew["acme"], status=499 if i % 2 else 200, created_at=now - timedelta(seconds=i))
    client = as_user("bob")
    first = client.get(reverse("console:usage"), {"status": "499"})
    assert "status=499&amp;before=" in first.content.decode()
    second = client.get(reverse("console:usage"), {"status": "499", **_cursor(first, "older")})
    rows = [*first.context["page"], *second.context["page"]]
    assert len(rows) == 70 and {row.status for row in rows} == {499}


def test_a_malformed_cursor_gives_the_first_page(as_user, variety):
    response = as_user("bob").get(reverse("console:usage"), {"before": "x.y", "after": "1."})
    assert response.status_code == 200 and response.context["page"].first


def test_the_csv_export_holds_the_filtered_rows(as_user, variety):
    response = as_user("dave").get(reverse("console:usage_export"), {"status": "4xx"})
    assert response.streaming and response["Content-Type"] == "text/csv"
    assert "attachment" in response["Content-Disposition"]
    lines = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {line["request_id"] for line in lines} == {
        str(variety["bad_request"].request_id),
        str(variety["limited"].request_id),
    }
    limited = next(line for line in lines if line["status"] == "429")
    assert limited["error_code"] == "rate_limit_exceeded" and limited["key_name"] == "acme key"


def _insert_usage_rows(organisation, count: int) -> None:
    """Insert ``count`` rows with executemany: the same rows bulk_create would
    write, without building 100,000 model instances first."""
    fields = [f for f in UsageLog._meta.concrete_fields if not f.primary_key]
    template = UsageLog(
        request_id=uuid.uuid4(),
        organisation=organisation,
        endpoint="/v1/responses",
        model="sim-model",
        status=200,
        input_tokens=1200,
        output_tokens=300,
        ttft_ms=100.0,
        duration_ms=300.0,
        user_agent="openai-python/3.57.0",
    )
    base = [f.get_db_prep_save(f.pre_save(template, True), connection) for f in fields]
    columns = [f.column for f in fields]
    rid, stamp = columns.index("request_id"), columns.index("created_at")
    rid_field, stamp_field = fields[rid], fields[stamp]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(UsageLog._meta.db_table)} ({', '.join(map(quote, columns))}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})"
    )
    now = timezone.now()
    with connection.cursor() as cursor:
        for start in range(0, count, 10_000):
            rows = []
            for i in range(start, min(count, start + 10_000)):
                row = list(base)
                row[rid] = rid_field.get_db_prep_save(uuid.uuid4(), connection)
                row[stamp] = stamp_field.get_db_prep_save(now - timedelta(seconds=i), connection)
                rows.append(row)
            cursor.executemany(sql, rows)


def test_csv_export_streams_in_bounded_memory(as_user, crew, monkeypatch):
    """25,000 rows materialised at once take well over 25 MB, and their CSV
    text alone about 4.6 MB; the export reads them 200 at a time (its chunk,
    made small here so that few rows show the bound) and hands the text on in
    64 kB pieces, so its peak is a fraction of the whole."""
    from responses_api.usage import export

    monkeypatch.setattr(export, "CHUNK", 200)
    _insert_usage_rows(crew["acme"], 25_000)
    assert UsageLog.objects.filter(organisation=crew["acme"]).count() == 25_000
    response = as_user("alice").get(reverse("console:usage_export"))
    tracemalloc.start()
    try:
        lines = 0
        size = 0
        for chunk in response.streaming_content:
            lines += chunk.count(b"\n")
            size += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines == 25_001
    assert size > 4_000_000  # the whole export is large …
    assert peak < size / 4, f"peak {peak / 1e6:.2f} MB of {size / 1e6:.1f} MB"  # … its peak is not
