"""Strict fields and serializers: validate once, at the edge, and refuse what
the schema does not allow.

DRF's own fields are lenient (``"5"`` for an integer, ``1`` for a string,
``"yes"`` for a boolean, unknown fields ignored); an API whose OpenAPI schema
says ``integer`` should refuse a string rather than guess, so these accept
only the JSON type the schema names.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rest_framework import serializers

# PostgreSQL's integer: a larger value would be a database error, not a 400.
MAX_INT = 2_147_483_647


class ObjectTypeField(serializers.Field):
    """The constant ``object`` of every resource (``"api_key"``, ``"backend"``…)."""

    def __init__(self, value: str, **kwargs: Any) -> None:
        self.value = value
        super().__init__(read_only=True, **kwargs)

    def get_attribute(self, instance: Any) -> str:
        return self.value

    def to_representation(self, value: Any) -> str:
        return self.value


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictEmailField(serializers.EmailField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictIntegerField(serializers.IntegerField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", MAX_INT)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class StrictDecimalField(serializers.DecimalField):
    """A price: a JSON number in, a JSON number out."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_digits", 12)
        kwargs.setdefault("decimal_places", 6)
        kwargs.setdefault("coerce_to_string", False)
        kwargs.setdefault("min_value", 0)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Decimal:
        if isinstance(data, bool) or not isinstance(data, int | float | Decimal):
            self.fail("invalid")
        return Decimal(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictSerializer(serializers.Serializer):
    """A request body names only fields the resource has."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(set(data) - writable)
            if unknown:
                raise serializers.ValidationError(
                    {name: [f"Unknown parameter: '{name}'."] for name in unknown}
                )
        return super().to_internal_value(data)


class PlatformGuardedSerializer(StrictSerializer):
    """A resource with fields that only platform staff set (in the console or
    on the command line), shown here: the platform's own network is behind
    them. An organisation admin naming one gets a 400 that says so."""

    staff_only: tuple[str, ...] = ("allow_private",)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            refused = [name for name in self.staff_only if name in data]
            if refused:
                raise serializers.ValidationError(
                    {name: ["Only platform staff may set this."] for name in refused}
                )
        return super().to_internal_value(data)


class DeletedSerializer(serializers.Serializer):
    """What a DELETE of a resource answers (OpenAI's shape)."""

    id = serializers.CharField()
    object = serializers.CharField()
    deleted = serializers.BooleanField()


def deleted(object_type: str, object_id: object) -> dict[str, Any]:
    return {"id": str(object_id), "object": f"{object_type}.deleted", "deleted": True}
