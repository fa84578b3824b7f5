"""The usage log: filtered cursor pages, or every matching row streamed as
CSV or JSON lines (``?format=csv|jsonl``).

A streamed export holds one chunk of rows at a time. Under ASGI Django would
gather a synchronous iterator into a list before sending it (its
``StreamingHttpResponse`` cannot iterate one asynchronously), so there the
rows are handed over piece by piece from the request's thread instead.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from admin_api.filters import UsageFilter
from admin_api.serializers.usage import UsageRecordSerializer
from admin_api.views.base import AdminViewSet
from responses_api.models import UsageLog
from responses_api.usage.export import (
    RECORD_COLUMNS,
    pieces_async,
    usage_csv_lines,
    usage_jsonl_lines,
    usage_record,
)

FORMATS = {
    "csv": ("text/csv; charset=utf-8", usage_csv_lines, "csv"),
    "jsonl": ("application/x-ndjson", usage_jsonl_lines, "jsonl"),
}


class UsageViewSet(AdminViewSet):
    queryset = UsageLog.objects.none()
    serializer_class = UsageRecordSerializer
    filterset_class = UsageFilter
    lookup_field = "request_id"
    max_limit = 1000

    def tenant_queryset(self) -> QuerySet[UsageLog]:
        return UsageLog.objects.filter(organisation=self.organisation)

    @extend_schema(
        summary="The usage log, newest first: one row per API request",
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=["json", "csv", "jsonl"],
                description="json (pages, the default), or every matching row streamed "
                "as csv or jsonl (after and limit do not apply).",
            )
        ],
        responses={
            (200, "application/json"): UsageRecordSerializer(many=True),
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/x-ndjson"): OpenApiTypes.STR,
        },
    )
    def list(self, request: Request) -> Any:
        wanted = request.query_params.get("format", "json")
        if wanted != "json" and wanted not in FORMATS:
            raise ValidationError({"format": ["One of json, csv, jsonl."]})
        rows = self.filter_queryset(self.get_queryset())
        if wanted == "json":
            page = self.paginate_queryset(rows) or []
            records = [usage_record(getattr(row, c) for c in RECORD_COLUMNS) for row in page]
            return self.get_paginated_response(records)
        return self._stream(rows, wanted)

    def _stream(self, rows: QuerySet[UsageLog], wanted: str) -> StreamingHttpResponse:
        content_type, lines, suffix = FORMATS[wanted]
        pieces = lines(rows)
        streamed = (
            pieces_async(pieces) if isinstance(self.request._request, ASGIRequest) else pieces
        )
        response = StreamingHttpResponse(streamed, content_type=content_type)
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = (
            f'attachment; filename="usage-{self.organisation.slug}-{stamp}.{suffix}"'
        )
        response["Cache-Control"] = "no-store"
        return response
