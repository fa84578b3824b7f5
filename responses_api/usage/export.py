"""The usage log read out in bulk: CSV (the console's export, the management
API's ``?format=csv``) and usage records (the API's JSON and JSON lines).

Rows are read from the database in chunks and handed on in pieces of about
64 kB, so memory stays bounded however many rows match. On PostgreSQL they
come from a server-side cursor inside a transaction: outside one, Django
declares the cursor ``WITH HOLD`` and PostgreSQL runs the whole query before
the first row. So the first byte leaves at once at any size. Close the
generator (the response does) to end the transaction.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.db.models import QuerySet

from accounts.models import ApiKey, Organisation
from responses_api.usage.columns import USAGE_EXPORT_COLUMNS
from responses_api.usage.spreadsheet import csv_value

# The usage log's export columns, with the organisation and key named for
# people reading the file (the console's export leaves out internal ids).
_NAMED = {"organisation", "key_name"}
_TIMES = USAGE_EXPORT_COLUMNS[:3]  # request_id, created_at, finished_at
CSV_HEADER = (
    *_TIMES,
    "organisation",
    "key_prefix",
    "key_name",
    *(c for c in USAGE_EXPORT_COLUMNS[3:] if c not in {"key_prefix", "backend_id", "notices"}),
)
# Read from the row itself: the organisation's slug and the key's name are
# looked up once each, not joined, so that the rows come straight off the
# index in order and the first of them leaves at once.
_ROW_COLUMNS = ("organisation_id", "api_key_id", *(c for c in CSV_HEADER if c not in _NAMED))
# A usage record (the management API's ``usage_record``): every export
# column, the key's id, and never the organisation (the caller's own).
RECORD_COLUMNS = (*_TIMES, "api_key_id", *USAGE_EXPORT_COLUMNS[3:])
# A usage record's names for the columns named otherwise in the database.
RECORD_NAMES = {"request_id": "id", "api_key_id": "key_id"}
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


def _rows(queryset: QuerySet[Any], columns: Iterable[str]) -> Iterator[tuple[Any, ...]]:
    """The rows' ``columns``, newest first, from a cursor in a transaction."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # Compiling the plan of a query over millions of rows (PostgreSQL
            # JIT-compiles costly ones) took longer than the first rows.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
        yield from (
            queryset.order_by("-created_at", "-id").values_list(*columns).iterator(chunk_size=CHUNK)
        )


def usage_csv_lines(queryset: QuerySet[Any]) -> Iterator[str]:
    """The rows as CSV text, newest first, in pieces of about 64 kB."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_HEADER)
    yield buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    slugs: dict[int, str] = {}
    names: dict[Any, str] = {}
    for org_id, key_id, request_id, created, finished, *rest in _rows(queryset, _ROW_COLUMNS):
        slug = slugs.get(org_id)
        if slug is None:
            slug = slugs[org_id] = Organisation.objects.get(pk=org_id).slug
        name = names.get(key_id, "") if key_id else ""
        if key_id and key_id not in names:
            name = names[key_id] = (
                ApiKey.objects.filter(pk=key_id).values_list("name", flat=True).first() or ""
            )
        prefix, *others = rest
        values = (request_id, created, finished, slug, prefix, name, *others)
        writer.writerow([csv_value(c, v) for c, v in zip(CSV_HEADER, values, strict=True)])
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
    record = {"id": row["request_id"], "object": "usage_record"}
    record.update((RECORD_NAMES.get(name, name), value) for name, value in row.items())
    return record


def usage_jsonl_lines(queryset: QuerySet[Any]) -> Iterator[str]:
    """The rows as JSON lines of usage records, newest first, in pieces of
    about 64 kB."""
    rows = _rows(queryset, RECORD_COLUMNS)
    return _pieces(orjson.dumps(usage_record(values)).decode() + "\n" for values in rows)


_DONE = object()


def _next(pieces: Iterator[str]) -> object:
    return next(pieces, _DONE)


async def pieces_async(pieces: Iterator[str]) -> AsyncIterator[str]:
    """``pieces`` served to an ASGI server without being read whole first
    (what Django does with a sync iterator under ASGI): pulled one at a time
    in the request's own thread, so the generator's transaction and cursor
    stay on one connection, and closed however the stream ends."""
    pull = sync_to_async(_next, thread_sensitive=True)
    try:
        while (piece := await pull(pieces)) is not _DONE:
            yield str(piece)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()
