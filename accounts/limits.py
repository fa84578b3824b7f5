"""The values a spend limit takes, validated the same way for an
organisation and for a key (``accounts.services`` writes them)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError

from accounts.validation import whole_field

# The organisation's settings that limit what it spends in a calendar month.
SPEND_FIELDS = ("monthly_budget", "monthly_tokens", "budget_warning_percent")

# A monthly budget's bounds: the column holds 16 digits, 6 after the point.
BUDGET_DIGITS = 16
BUDGET_PLACES = 6
BUDGET_MIN = Decimal(1).scaleb(-BUDGET_PLACES)
BUDGET_MAX = Decimal(10) ** (BUDGET_DIGITS - BUDGET_PLACES)
TOKENS_MAX = 2**63 - 1
WARNING_PERCENT_MAX = 100


def budget_clean(value: object, *, field: str) -> Decimal | None:
    """A positive amount in the currency of the model prices, or None (no
    budget). Floats are refused: a budget is compared with exact sums."""
    if value is None:
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, Decimal | int | str):
            raise InvalidOperation
        amount = Decimal(value.strip() if isinstance(value, str) else value)
    except InvalidOperation:
        raise ValidationError({field: "An amount, e.g. 25.00."}) from None
    if not amount.is_finite() or amount <= 0 or amount >= BUDGET_MAX:
        raise ValidationError({field: f"An amount above 0 and below {BUDGET_MAX}."})
    if amount != amount.quantize(BUDGET_MIN):
        raise ValidationError({field: f"At most {BUDGET_PLACES} digits after the point."})
    return amount


def _whole(value: object, *, field: str, low: int, high: int) -> int:
    message = f"A whole number from {low} to {high}."
    return whole_field(value, field=field, message=message, low=low, high=high)


def spend_limit_clean(field: str, value: object) -> object:
    """A monthly budget or token quota (None: no limit), or the warning
    threshold in percent."""
    if field == "monthly_budget":
        return budget_clean(value, field=field)
    if field == "budget_warning_percent":
        return _whole(value, field=field, low=1, high=WARNING_PERCENT_MAX)
    if value is None:
        return None
    return _whole(value, field=field, low=1, high=TOKENS_MAX)


def audit_value(value: object) -> object:
    """A setting as the audit log's JSON keeps it (amounts as text)."""
    return str(value) if isinstance(value, Decimal) else value
