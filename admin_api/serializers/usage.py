"""A usage record as the management API lists it. The rows themselves are
built by ``responses_api.usage.export.usage_record`` (for JSON and JSON lines
alike); this serializer describes them in the schema, field by field from
the record's columns and ``UsageLog``'s fields, so the schema lists what the
records carry."""

from __future__ import annotations

from typing import Any

from django.db import models
from rest_framework import serializers

from admin_api.serializers.base import ObjectTypeField
from responses_api.models import UsageLog
from responses_api.usage.export import RECORD_COLUMNS, RECORD_NAMES

_HELP = {
    "request_id": "The request id (X-Request-Id).",
    "session_id": "The client's session (session-id).",
}


def _record_field(column: str) -> serializers.Field:
    """The serializer field of one record column: the JSON type
    ``usage_record`` turns the model field's value into."""
    field = next(f for f in UsageLog._meta.concrete_fields if f.attname == column)
    options: dict[str, Any] = {"allow_null": True} if field.null else {}
    if column in _HELP:
        options["help_text"] = _HELP[column]
    if isinstance(field, models.ForeignKey | models.UUIDField):
        return serializers.UUIDField(**options)
    if isinstance(field, models.DateTimeField):
        return serializers.DateTimeField(**options)
    if isinstance(field, models.BooleanField):
        return serializers.BooleanField(**options)
    if isinstance(field, models.IntegerField):
        return serializers.IntegerField(**options)
    if isinstance(field, models.DecimalField | models.FloatField):
        return serializers.FloatField(**options)
    if isinstance(field, models.JSONField):
        # ``notices``: the codes of the notices the response carried.
        return serializers.ListField(child=serializers.CharField(), **options)
    return serializers.CharField(**options)


class UsageRecordSerializer(serializers.Serializer):
    def get_fields(self) -> dict[str, serializers.Field]:
        fields: dict[str, serializers.Field] = {
            "id": _record_field("request_id"),
            "object": ObjectTypeField("usage_record"),
        }
        for column in RECORD_COLUMNS:
            fields.setdefault(RECORD_NAMES.get(column, column), _record_field(column))
        return fields
