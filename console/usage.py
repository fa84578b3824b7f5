"""The usage log as the console reads it: filters, keyset pages and the
streamed CSV export."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import ApiKey, Organisation
from console.forms import RANGES
from responses_api.usage import EXPORT_COLUMNS, csv_cell

# The usage log's export columns, with the organisation and key named for
# people reading the file (the console's export leaves out internal ids).
_NAMED = {"organisation", "key_name"}
CSV_HEADER = (
    "request_id",
    "created_at",
    "finished_at",
    "organisation",
    "key_prefix",
    "key_name",
    *(c for c in EXPORT_COLUMNS[4:] if c not in {"backend_id", "notices"}),
)
# Read from the row itself: the organisation's slug and the key's name are
# looked up once each, not joined, so that the rows come straight off the
# index in order and the first of them leaves at once.
_ROW_COLUMNS = ("organisation_id", "api_key_id", *(c for c in CSV_HEADER if c not in _NAMED))
CHUNK = 2000
PIECE = 64 * 1024
PER_PAGE = 50


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
    return queryset


def _cell(value: Any) -> Any:
    return csv_cell(value.isoformat() if hasattr(value, "isoformat") else value)


def usage_csv_lines(queryset: QuerySet) -> Iterator[str]:
    """The rows as CSV text, newest first, sent in pieces of about 64 kB.

    On PostgreSQL the rows come from a server-side cursor inside a
    transaction: outside one, Django declares it ``WITH HOLD``, and
    PostgreSQL then runs the whole query before the first row. So memory
    stays bounded and the first byte leaves at once however many rows match.
    Close the generator (the response does) to end the transaction."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_HEADER)
    yield buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    slugs: dict[int, str] = {}
    names: dict[Any, str] = {}
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # Compiling the plan of a query over millions of rows (PostgreSQL
            # JIT-compiles costly ones) took longer than the first rows.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
        rows = (
            queryset.order_by("-created_at", "-id")
            .values_list(*_ROW_COLUMNS)
            .iterator(chunk_size=CHUNK)
        )
        for org_id, key_id, request_id, created, finished, *rest in rows:
            slug = slugs.get(org_id)
            if slug is None:
                slug = slugs[org_id] = Organisation.objects.get(pk=org_id).slug
            name = names.get(key_id, "") if key_id else ""
            if key_id and key_id not in names:
                name = names[key_id] = (
                    ApiKey.objects.filter(pk=key_id).values_list("name", flat=True).first() or ""
                )
            prefix, *others = rest
            writer.writerow(
                [_cell(v) for v in (request_id, created, finished, slug, prefix, name, *others)]
            )
            if buffer.tell() >= PIECE:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
    yield buffer.getvalue()


def _next_or_none(lines: Iterator[str]) -> str | None:
    return next(lines, None)


class AsyncLines:
    """A sync generator of lines served to an ASGI server without reading
    it whole first (what Django does with a sync iterator under ASGI). Each
    piece is produced by ``next`` in the request's own thread, so the
    generator's transaction and cursor stay on one connection; the
    response's ``close`` (run in that thread too) closes the generator."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines = lines

    def __aiter__(self) -> AsyncLines:
        return self

    async def __anext__(self) -> str:
        piece = await sync_to_async(_next_or_none, thread_sensitive=True)(self.lines)
        if piece is None:
            raise StopAsyncIteration
        return piece

    def close(self) -> None:
        close = getattr(self.lines, "close", None)
        if close is not None:
            close()


# --- Keyset pages ------------------------------------------------------------


@dataclass
class KeysetPage:
    """One page of the log, newest first, and where the pages beside it
    start: no count and no offset, so every page costs the same."""

    rows: list[Any]
    newer: str | None = None  # ``after=`` cursor of the page of newer rows
    older: str | None = None  # ``before=`` cursor of the page of older rows
    first: bool = True

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def cursor_of(row: Any) -> str:
    micros = (row.created_at - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}.{row.id}"


def parse_cursor(raw: str | None) -> tuple[datetime, int] | None:
    """A cursor from a URL, or None if there is none or it is malformed."""
    if not raw:
        return None
    micros, _, row_id = raw.partition(".")
    try:
        return _EPOCH + timedelta(microseconds=int(micros)), int(row_id)
    except (ValueError, OverflowError):
        return None


def usage_page(
    queryset: QuerySet, *, before: str | None = None, after: str | None = None
) -> KeysetPage:
    """The page of rows older than ``before`` (or newer than ``after``, or
    the newest), ordered by ``(created_at, id)`` descending."""
    newer_than = parse_cursor(after)
    if newer_than is not None and parse_cursor(before) is None:
        stamp, row_id = newer_than
        ahead = list(
            queryset.filter(Q(created_at__gt=stamp) | Q(created_at=stamp, id__gt=row_id))
            .filter(created_at__gte=stamp)
            .order_by("created_at", "id")[: PER_PAGE + 1]
        )
        if len(ahead) <= PER_PAGE:
            return usage_page(queryset)  # reached the newest: the first page
        rows = ahead[:PER_PAGE][::-1]
        return KeysetPage(rows, newer=cursor_of(rows[0]), older=cursor_of(rows[-1]), first=False)
    older_than = parse_cursor(before)
    if older_than is not None:
        stamp, row_id = older_than
        queryset = queryset.filter(
            Q(created_at__lt=stamp) | Q(created_at=stamp, id__lt=row_id)
        ).filter(created_at__lte=stamp)
    found = list(queryset.order_by("-created_at", "-id")[: PER_PAGE + 1])
    rows = found[:PER_PAGE]
    return KeysetPage(
        rows,
        newer=cursor_of(rows[0]) if rows and older_than else None,
        older=cursor_of(rows[-1]) if len(found) > PER_PAGE else None,
        first=older_than is None,
    )
