"""The usage log as the console reads it: filters and the streamed CSV export."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from console.forms import RANGES
from responses_api.usage import EXPORT_COLUMNS, csv_cell

# The usage log's export columns, with the organisation and key named for
# people reading the file (the console's export leaves out internal ids).
CSV_COLUMNS = (
    "request_id",
    "created_at",
    "finished_at",
    "organisation__slug",
    "key_prefix",
    "api_key__name",
    *(c for c in EXPORT_COLUMNS[4:] if c not in {"backend_id", "notices"}),
)
CSV_HEADER = tuple(
    c.replace("organisation__slug", "organisation").replace("api_key__name", "key_name")
    for c in CSV_COLUMNS
)
CHUNK = 2000
PIECE = 64 * 1024


def usage_filter(queryset: QuerySet, data: dict[str, Any]) -> QuerySet:
    """Apply the cleaned fields of :class:`console.forms.UsageFilterForm`."""
    if data.get("request_id"):
        queryset = queryset.filter(request_id=data["request_id"])
    status = data.get("status")
    if status == "4xx":
        # 499 (client disconnected) is not a client error: it has its own filter.
        queryset = queryset.filter(status__gte=400, status__lt=500).exclude(status=499)
    elif status == "5xx":
        queryset = queryset.filter(status__gte=500, status__lt=600)
    elif status:
        queryset = queryset.filter(status=int(status))
    if data.get("model"):
        queryset = queryset.filter(model=data["model"])
    if data.get("key"):
        queryset = queryset.filter(api_key_id=data["key"])
    if data.get("backend"):
        queryset = queryset.filter(backend_id=data["backend"])
    if data.get("stream") == "yes":
        queryset = queryset.filter(stream=True)
    elif data.get("stream") == "no":
        queryset = queryset.filter(stream=False)
    if data.get("range") in RANGES:
        queryset = queryset.filter(created_at__gte=timezone.now() - RANGES[data["range"]])
    if data.get("since"):
        queryset = queryset.filter(created_at__gte=data["since"])
    if data.get("until"):
        queryset = queryset.filter(created_at__lt=data["until"])
    if data.get("session"):
        queryset = queryset.filter(session_id=data["session"].strip())
    return queryset


def usage_csv_lines(queryset: QuerySet) -> Iterator[str]:
    """The rows as CSV text, read from the database in chunks (a server-side
    cursor on PostgreSQL) and sent in pieces of about 64 kB, so memory stays
    bounded however many rows match."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_HEADER)
    rows = queryset.order_by("-created_at").values_list(*CSV_COLUMNS).iterator(chunk_size=CHUNK)
    for row in rows:
        writer.writerow([csv_cell(v.isoformat() if hasattr(v, "isoformat") else v) for v in row])
        if buffer.tell() >= PIECE:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
