"""The usage log as the console reads it: filters, and the streamed CSV export
(``responses_api.usage_rows``, shared with the management API)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from console.forms import RANGES
from responses_api.usage_rows import CSV_COLUMNS, CSV_HEADER, usage_csv_lines

__all__ = ["CSV_COLUMNS", "CSV_HEADER", "usage_csv_lines", "usage_filter"]


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
