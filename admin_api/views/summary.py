"""``usage/summary``: usage in time buckets, shaped like OpenAI's usage API.

``start_time`` and ``end_time`` are unix seconds, ``bucket_width`` is
``1m``, ``1h`` or ``1d`` and ``group_by`` any of ``model``, ``key``,
``backend`` and ``status``. The buckets come from the usage roll-ups
(``responses_api.usage.summary``), so a year of daily buckets costs what a
day does; one-minute buckets read the raw rows and are capped at a week.
The answer is a page of buckets as OpenAI's is (``limit``, and ``page``, the
cursor of the next one, given back as ``next_page``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from admin_api.views.base import AdminViewSet
from responses_api.models import UsageLog
from responses_api.usage.summary import GROUPS, MAX_BUCKETS, WIDTHS, summarize

# Buckets per page, as OpenAI's usage API: (default, most).
LIMITS = {"1m": (60, 1440), "1h": (24, 168), "1d": (7, 31)}
# Unix seconds this far out are no time anyone means (and overflow datetime).
LATEST = 253402300799  # 9999-12-31T23:59:59Z


class SummaryQuery(serializers.Serializer):
    start_time = serializers.IntegerField(min_value=0, max_value=LATEST)
    end_time = serializers.IntegerField(min_value=0, max_value=LATEST, required=False)
    bucket_width = serializers.ChoiceField(choices=list(WIDTHS), default="1d")
    group_by = serializers.ListField(
        child=serializers.ChoiceField(choices=list(GROUPS)), required=False, default=list
    )
    limit = serializers.IntegerField(min_value=1, required=False)
    page = serializers.IntegerField(min_value=0, max_value=LATEST, required=False)


_RESULT_FIELDS: dict[str, serializers.Field] = {
    "object": serializers.CharField(),
    "requests": serializers.IntegerField(),
    "input_tokens": serializers.IntegerField(),
    "cached_tokens": serializers.IntegerField(),
    "output_tokens": serializers.IntegerField(),
    "reasoning_tokens": serializers.IntegerField(),
    "cost": serializers.FloatField(),
    "cancelled": serializers.IntegerField(),
    "errors": serializers.IntegerField(),
    "ttft_p50_ms": serializers.FloatField(allow_null=True),
    "ttft_p95_ms": serializers.FloatField(allow_null=True),
    "model": serializers.CharField(required=False),
    "api_key_id": serializers.CharField(required=False, allow_null=True),
    "backend_id": serializers.CharField(required=False, allow_null=True),
    "status_class": serializers.CharField(required=False),
}
_PAGE = inline_serializer(
    "UsageSummaryPage",
    {
        "object": serializers.CharField(),
        "data": inline_serializer(
            "UsageSummaryBucket",
            {
                "object": serializers.CharField(),
                "start_time": serializers.IntegerField(),
                "end_time": serializers.IntegerField(),
                "results": inline_serializer("UsageSummaryResult", _RESULT_FIELDS, many=True),
            },
            many=True,
        ),
        "has_more": serializers.BooleanField(),
        "next_page": serializers.CharField(allow_null=True),
    },
)


def _query(request: Request) -> dict[str, Any]:
    params = request.query_params
    data: dict[str, Any] = {k: params.get(k) for k in params if k not in {"group_by", "group_by[]"}}
    groups = [
        part.strip()
        for value in params.getlist("group_by") + params.getlist("group_by[]")
        for part in value.split(",")
        if part.strip()
    ]
    if groups:
        data["group_by"] = groups
    query = SummaryQuery(data=data)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class UsageSummaryViewSet(AdminViewSet):
    queryset = UsageLog.objects.none()
    pagination_class = None

    @extend_schema(
        summary="Usage in time buckets (requests, tokens, cost, 499s, errors, TTFT)",
        parameters=[
            OpenApiParameter("start_time", OpenApiTypes.INT, required=True),
            OpenApiParameter("end_time", OpenApiTypes.INT),
            OpenApiParameter("bucket_width", OpenApiTypes.STR, enum=list(WIDTHS)),
            OpenApiParameter(
                "group_by", OpenApiTypes.STR, many=True, enum=list(GROUPS), explode=True
            ),
            OpenApiParameter("limit", OpenApiTypes.INT),
            OpenApiParameter("page", OpenApiTypes.INT, description="next_page of the last answer"),
        ],
        responses={200: _PAGE},
    )
    def summary(self, request: Request) -> Response:
        query = _query(request)
        width = query["bucket_width"]
        default, most = LIMITS[width]
        limit = min(query.get("limit") or default, most)
        start = query["page"] if query.get("page") is not None else query["start_time"]
        end = query.get("end_time")
        if end is None:
            end = int(timezone.now().timestamp())
        if end <= query["start_time"]:
            raise ValidationError({"end_time": ["end_time must be after start_time."]})
        step = int(WIDTHS[width].total_seconds())
        # One bucket more than the page, to know whether another follows.
        until = min(end, start - start % step + step * (limit + 1))
        if until <= start:
            return Response({"object": "page", "data": [], "has_more": False, "next_page": None})
        if (until - start) / step > MAX_BUCKETS:
            raise ValidationError({"bucket_width": ["Too many buckets; narrow the range."]})
        buckets = summarize(
            self.organisation.pk,
            start=datetime.fromtimestamp(start, tz=UTC),
            end=datetime.fromtimestamp(until, tz=UTC),
            bucket_width=width,
            group_by=query["group_by"],
        )
        more = len(buckets) > limit
        page = buckets[:limit]
        return Response(
            {
                "object": "page",
                "data": page,
                "has_more": more,
                "next_page": str(page[-1]["end_time"]) if more and page else None,
            }
        )
