"""The usage log as the console reads it: filters, keyset pages, and the
streamed CSV export (``responses_api.usage.export``, shared with the
management API)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from console.forms.usage import RANGES
from responses_api.usage.export import CSV_HEADER, pieces_async, usage_csv_lines

__all__ = ["CSV_HEADER", "pieces_async", "usage_csv_lines", "usage_filter", "usage_page"]

PER_PAGE = 50


def usage_filter(queryset: QuerySet, data: dict[str, Any]) -> QuerySet:
    """Apply the cleaned fields of :class:`console.forms.usage.UsageFilterForm`."""
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
    if data.get("endpoint"):
        queryset = queryset.filter(endpoint__startswith=data["endpoint"].strip())
    return queryset


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
