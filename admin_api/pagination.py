"""Cursor pages, OpenAI's list shape: ``{"object": "list", "data",
"has_more", "first_id", "last_id"}``; ``after`` (the id of the last object
seen) and ``limit`` page through, newest first.

A cursor rather than an offset: a page stays right while rows are added
(the usage log grows all the time), and the query is an indexed range scan
on ``(created_at, pk)`` however deep the page.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Q, QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response

ORDER = ("-created_at", "-pk")


def _limit(raw: str | None, *, default: int, maximum: int) -> int:
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise ValidationError({"limit": [f"A whole number from 1 to {maximum}."]})
    return int(raw)


class CursorList(BasePagination):
    default_limit = 20
    max_limit = 100

    def __init__(self) -> None:
        self.has_more = False

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any]:
        default = getattr(view, "default_limit", self.default_limit)
        maximum = getattr(view, "max_limit", self.max_limit)
        limit = _limit(request.query_params.get("limit"), default=default, maximum=maximum)
        after = request.query_params.get("after")
        if after is not None:
            queryset = self._after(queryset, view, after)
        rows = list(queryset.order_by(*ORDER)[: limit + 1])
        self.has_more = len(rows) > limit
        return rows[:limit]

    @staticmethod
    def _after(queryset: QuerySet[Any], view: Any, after: str) -> QuerySet[Any]:
        field = getattr(view, "lookup_field", "pk")
        try:
            anchor = queryset.filter(**{field: after}).values("created_at", "pk").first()
        except (ValueError, DjangoValidationError):
            anchor = None
        if anchor is None:
            raise ValidationError({"after": ["No object with this id in the list."]})
        when, pk = anchor["created_at"], anchor["pk"]
        return queryset.filter(Q(created_at__lt=when) | Q(created_at=when, pk__lt=pk))

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "object": "list",
                "data": data,
                "has_more": self.has_more,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        nullable_id = {"type": "string", "nullable": True}
        return {
            "type": "object",
            "required": ["object", "data", "has_more", "first_id", "last_id"],
            "properties": {
                "object": {"type": "string", "enum": ["list"]},
                "data": schema,
                "has_more": {"type": "boolean"},
                "first_id": nullable_id,
                "last_id": nullable_id,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        maximum = getattr(view, "max_limit", self.max_limit)
        return [
            {
                "name": "after",
                "in": "query",
                "required": False,
                "description": "The id of the last object of the previous page.",
                "schema": {"type": "string"},
            },
            {
                "name": "limit",
                "in": "query",
                "required": False,
                "description": f"How many objects, 1 to {maximum}.",
                "schema": {"type": "integer", "minimum": 1, "maximum": maximum},
            },
        ]

    def to_html(self) -> str:
        return ""
