"""The usage log read out in bulk: CSV (the console's export, the management
API's ``?format=csv``) and usage records (the API's JSON and JSON lines).

Rows are read from the database in chunks (a server-side cursor on
PostgreSQL) and handed on in pieces of about 64 kB, so memory stays bounded
however many rows match.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
from django.db.models import QuerySet

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
# A usage record (the management API's ``usage_record``): every export
# column, the key's id, and never the organisation (the caller's own).
RECORD_COLUMNS = ("request_id", "created_at", "finished_at", "api_key_id", *EXPORT_COLUMNS[3:])
CHUNK = 2000
PIECE = 64 * 1024


def _pieces(lines: Iterable[str]) -> Iterator[str]:
    buffer: list[str] = []
    size = 0
    for line in lines:
        buffer.append(line)
        size += len(line)
        if size >= PIECE:
            yield "".join(buffer)
            buffer.clear()
            size = 0
    if buffer:
        yield "".join(buffer)


def usage_csv_lines(queryset: QuerySet[Any]) -> Iterator[str]:
    """The rows as CSV text, newest first, in pieces of about 64 kB."""
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


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


def usage_record(values: Iterable[Any]) -> dict[str, Any]:
    """One row (the values of :data:`RECORD_COLUMNS`, in order) as a usage
    record of plain JSON types."""
    row = dict(zip(RECORD_COLUMNS, (_plain(v) for v in values), strict=True))
    names = {"request_id": "id", "api_key_id": "key_id"}
    record = {"id": row["request_id"], "object": "usage_record"}
    record.update((names.get(name, name), value) for name, value in row.items())
    return record


def usage_jsonl_lines(queryset: QuerySet[Any]) -> Iterator[str]:
    """The rows as JSON lines of usage records, newest first, in pieces of
    about 64 kB."""
    rows = queryset.order_by("-created_at").values_list(*RECORD_COLUMNS).iterator(chunk_size=CHUNK)
    return _pieces(orjson.dumps(usage_record(values)).decode() + "\n" for values in rows)
