"""Checks shared by the account service functions: each raises
:class:`~django.core.exceptions.ValidationError` keyed by the field, which the
console, the REST API and the commands show next to that field."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts.models import Membership

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def text_field(value: object, *, field: str, message: str, max_length: int = 200) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise ValidationError({field: message})
    if len(text) > max_length:
        raise ValidationError({field: f"At most {max_length} characters."})
    return text


def count_field(value: object, *, field: str, optional: bool = True) -> int | None:
    """A positive integer (limits, hours, days); None when optional."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError({field: "Ensure this value is greater than or equal to 1."})
    return value


def role_field(value: object, *, roles: Iterable[str] = Membership.Role.values) -> str:
    roles = list(roles)
    if value not in roles:
        raise ValidationError({"role": f"Pick one of: {', '.join(roles)}."})
    return str(value)


def expiry_field(value: object, *, field: str = "expires_at") -> datetime | None:
    """A moment in the future (a key's expiry), or None for never."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError({field: "A date and time."})
    if value <= timezone.now():
        raise ValidationError({field: "The expiry must be in the future."})
    return value


def all_errors(*checks: Callable[[], object]) -> list[object]:
    """The value of every check, or one error naming every field that
    failed (a form shows them all at once, not one per attempt)."""
    values: list[object] = []
    errors: dict[str, list[str]] = {}
    for check in checks:
        try:
            values.append(check())
        except ValidationError as error:
            errors.update(error.message_dict)
    if errors:
        raise ValidationError(errors)
    return values


def email_field(value: object) -> str:
    return text_field(
        value, field="email", message="Give an email address.", max_length=254
    ).lower()


def account_for_email(email: str) -> User | None:
    User = get_user_model()
    return (
        User.objects.filter(email__iexact=email).first()
        or User.objects.filter(username__iexact=email).first()
    )


def refuse_unknown(data: Mapping[str, object], allowed: Iterable[str]) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ValidationError({name: "This field cannot be changed." for name in unknown})
