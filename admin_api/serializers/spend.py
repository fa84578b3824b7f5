"""Monthly spend limits (a budget in the price currency, a token quota) and
the month's spend so far, as the management API shows and takes them.

A value is checked by ``accounts.limits.spend_limit_clean``, the check the
console, the commands and the services run, so the same value gets the
same answer and the same message everywhere. Amounts go out as strings:
a budget is compared with exact sums, which a JSON number (a binary float
to most clients) cannot carry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from accounts.limits import BUDGET_PLACES, TOKENS_MAX, spend_limit_clean
from responses_api.usage.monthly import month_spent, month_start

# Past the point the service keeps at most BUDGET_PLACES digits, before it
# at most this many.
BUDGET_INTEGER_DIGITS = 10
BUDGET_HELP = (
    "Per calendar month (UTC), in the organisation's currency; once reached, "
    "requests are refused (429 insufficient_quota) until the month ends. Null: no budget."
)
TOKENS_HELP = "Input + output tokens per calendar month (UTC). Null: no quota."
WARNING_HELP = (
    "Past this share of a monthly limit (the organisation's or a key's), in percent, "
    "responses carry the notice budget_near_limit."
)


def amount_text(value: Decimal) -> str:
    """``50``, ``12.5``: the amount without the column's trailing zeros, and
    never in exponent notation."""
    text = f"{value.normalize():f}"
    return text if text != "-0" else "0"


def _spend_check(field: str, value: object) -> Any:
    try:
        return spend_limit_clean(field, value)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(exc.message_dict.get(field, exc.messages)) from None


class MonthlyBudgetField(serializers.DecimalField):
    """A budget: a decimal string (``"12.50"``) or a JSON number in, a decimal
    string out. A number is read as the text the client wrote, not as the
    binary float it parses into (``12.1``, not ``12.0999…``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", BUDGET_HELP)
        super().__init__(
            max_digits=BUDGET_INTEGER_DIGITS + BUDGET_PLACES,
            decimal_places=BUDGET_PLACES,
            coerce_to_string=True,
            allow_null=True,
            required=False,
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> Decimal:
        if isinstance(data, float):
            data = repr(data)
        # Null never gets here (``allow_null``): the check answers an amount.
        value = _spend_check(str(self.field_name), data)
        assert isinstance(value, Decimal)
        return value

    def to_representation(self, value: Any) -> str:
        return amount_text(Decimal(value))


class MonthlyBudgetFieldSchema(OpenApiSerializerFieldExtension):
    """A budget is taken as a decimal string or a number, and given back as a
    string."""

    target_class = MonthlyBudgetField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        text = {"type": "string", "format": "decimal", "example": "50"}
        if direction == "request":
            return {"oneOf": [text, {"type": "number", "exclusiveMinimum": True, "minimum": 0}]}
        return text


class SpendCountField(serializers.IntegerField):
    """A whole number of the spend settings, checked as the console checks it."""

    def to_internal_value(self, data: Any) -> int:
        value = _spend_check(str(self.field_name), data)
        assert isinstance(value, int)
        return value


class MonthlyTokensField(SpendCountField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", TOKENS_HELP)
        super().__init__(
            min_value=1, max_value=TOKENS_MAX, allow_null=True, required=False, **kwargs
        )


class BudgetWarningField(SpendCountField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", WARNING_HELP)
        super().__init__(min_value=1, max_value=100, required=False, **kwargs)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is None:  # the threshold cannot be removed: the check says what it takes
            _spend_check(str(self.field_name), data)
        return super().validate_empty_values(data)


class SpendSerializer(serializers.Serializer):
    """What was spent in the current calendar month (UTC): every request
    counts, whatever its status."""

    month = serializers.CharField(help_text="The month, YYYY-MM (UTC).")
    cost = serializers.CharField(help_text="In the currency of the model prices.")
    tokens = serializers.IntegerField(help_text="Input + output tokens.")


def spend_body(spent: tuple[Decimal, int], month: datetime) -> dict[str, Any]:
    cost, tokens = spent
    return {"month": month.strftime("%Y-%m"), "cost": amount_text(cost), "tokens": tokens}


def this_month() -> datetime:
    return month_start(datetime.now(UTC))


def month_spend(organisation_id: int, api_key_id: str | None = None) -> dict[str, Any]:
    """The month's spend of an organisation, or of one of its keys."""
    month = this_month()
    return spend_body(month_spent(organisation_id, api_key_id, month=month), month)
