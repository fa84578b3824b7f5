"""Query filters of the usage log, the audit log and the MCP servers
(django-filter): each parameter is validated, and a bad value is a 400
naming it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import django_filters
from django import forms
from django.core.validators import RegexValidator
from django.db.models import Q, QuerySet

from accounts.models import AuditEntry
from responses_api.models import McpServer, UsageLog


class MomentField(forms.Field):
    """An ISO 8601 date-time (UTC when it names no zone) or unix seconds."""

    default_error_messages = {
        "invalid": "An ISO 8601 date-time (e.g. 2026-05-01T00:00:00Z) or unix seconds."
    }

    def to_python(self, value: Any) -> datetime | None:
        if value in (None, ""):
            return None
        text = str(value).strip()
        try:
            if text.isdigit():
                return datetime.fromtimestamp(int(text), tz=UTC)
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            # In UTC, as the database compares it: an offset at the end of
            # the calendar (9999-12-31T23:59-23:00) leaves it, and
            # PostgreSQL refuses an offset past ±15:59 outright.
            return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
        except (ValueError, OverflowError, OSError):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None


class MomentFilter(django_filters.Filter):
    field_class = MomentField


STATUS = RegexValidator(r"^(?:[1-5][0-9]{2}|[45]xx)$", "An HTTP status (e.g. 499) or 4xx, 5xx.")
BOOLEAN = (("true", "true"), ("false", "false"))


class UsageFilter(django_filters.FilterSet):
    request_id = django_filters.UUIDFilter(help_text="One request, by its X-Request-Id.")
    status = django_filters.CharFilter(
        method="filter_status",
        validators=[STATUS],
        help_text="An HTTP status, or 4xx (499 excluded: it has its own) or 5xx.",
    )
    model = django_filters.CharFilter(help_text="The model id the client asked for.")
    key = django_filters.UUIDFilter(field_name="api_key_id", help_text="An API key's id.")
    backend = django_filters.UUIDFilter(field_name="backend_id", help_text="A backend's id.")
    since = MomentFilter(field_name="created_at", lookup_expr="gte", help_text="At or after.")
    until = MomentFilter(field_name="created_at", lookup_expr="lt", help_text="Before.")
    stream = django_filters.ChoiceFilter(
        choices=BOOLEAN, method="filter_stream", help_text="Streamed requests only, or none."
    )
    session = django_filters.CharFilter(
        field_name="session_id", help_text="A client session's turns (Codex's session-id)."
    )

    class Meta:
        model = UsageLog
        fields: list[str] = []

    def filter_status(self, queryset: QuerySet[UsageLog], name: str, value: str) -> Any:
        if value == "4xx":
            return queryset.filter(status__gte=400, status__lt=500).exclude(status=499)
        if value == "5xx":
            return queryset.filter(status__gte=500, status__lt=600)
        return queryset.filter(status=int(value))

    def filter_stream(self, queryset: QuerySet[UsageLog], name: str, value: str) -> Any:
        return queryset.filter(stream=value == "true")


class AuditFilter(django_filters.FilterSet):
    action = django_filters.CharFilter(
        method="filter_action",
        help_text="An action (api_key.create), or a family of them ending in a dot (api_key.).",
    )
    actor = django_filters.CharFilter(
        method="filter_actor", help_text="A person's username, or an admin key's id."
    )
    since = MomentFilter(field_name="created_at", lookup_expr="gte", help_text="At or after.")
    until = MomentFilter(field_name="created_at", lookup_expr="lt", help_text="Before.")

    class Meta:
        model = AuditEntry
        fields: list[str] = []

    def filter_action(self, queryset: QuerySet[AuditEntry], name: str, value: str) -> Any:
        if value.endswith("."):
            return queryset.filter(action__startswith=value)
        return queryset.filter(action=value)

    def filter_actor(self, queryset: QuerySet[AuditEntry], name: str, value: str) -> Any:
        by_name = Q(actor__username=value)
        try:
            return queryset.filter(by_name | Q(admin_key_id=UUID(value)))
        except ValueError:
            return queryset.filter(by_name)


class McpServerFilter(django_filters.FilterSet):
    label = django_filters.CharFilter(help_text="One server, by its label.")
    enabled = django_filters.ChoiceFilter(
        choices=BOOLEAN, method="filter_enabled", help_text="Enabled servers only, or disabled."
    )

    class Meta:
        model = McpServer
        fields: list[str] = []

    def filter_enabled(self, queryset: QuerySet[McpServer], name: str, value: str) -> Any:
        return queryset.filter(enabled=value == "true")
