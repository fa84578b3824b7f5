"""The field checks of every service function, the catalogue's included
(``responses_api`` may import ``accounts``, not the reverse): declared once, so
the same value gets the same answer and the same message wherever it is
written. Each raises :class:`~django.core.exceptions.ValidationError` keyed by
the field, which the console, the REST API and the commands show next to that
field."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts.models import Membership

if TYPE_CHECKING:
    from django.contrib.auth.models import User


T = TypeVar("T")

# A check of one field, given the field's name and the value as received.
Check = Callable[[str, object], object]


def text_field(
    value: object,
    *,
    field: str,
    message: str,
    max_length: int = 200,
    too_long: str | None = None,
) -> str:
    """The text without surrounding spaces; ``message`` when there is none,
    ``too_long`` (by default the limit) when it is longer than ``max_length``."""
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise ValidationError({field: message})
    if len(text) > max_length:
        raise ValidationError({field: too_long or f"At most {max_length} characters."})
    return text


def one_word(value: object) -> bool:
    """Ids and aliases travel in a request's ``model`` and in URLs: one word."""
    return isinstance(value, str) and bool(value) and not any(c.isspace() for c in value)


def whole_field(
    value: object, *, field: str, message: str, low: int = 1, high: int | None = None
) -> int:
    """A whole number from ``low`` to ``high`` (None: no upper bound). A bool
    is an int to Python, never a number here."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError({field: message})
    if value < low or (high is not None and value > high):
        raise ValidationError({field: message})
    return value


def count_field(value: object, *, field: str, optional: bool = True) -> int | None:
    """A positive integer (limits, hours, days, tokens); None when optional."""
    if value is None and optional:
        return None
    return whole_field(
        value, field=field, message="Ensure this value is greater than or equal to 1."
    )


def required_count(field: str, value: object) -> int | None:
    """:func:`count_field` as a :data:`Check`, for a count that must be set."""
    return count_field(value, field=field, optional=False)


def optional_count(field: str, value: object) -> int | None:
    """:func:`count_field` as a :data:`Check`, for a limit that may be empty."""
    return count_field(value, field=field)


def flag_field(value: object, *, field: str) -> bool:
    """Only a real bool: JSON's ``"false"`` or ``0`` is a mistake, not an answer."""
    if not isinstance(value, bool):
        raise ValidationError({field: "True or false."})
    return value


def choice_field(
    value: object, *, field: str, choices: Iterable[str], message: str | None = None
) -> str:
    """One of ``choices``; by default the message lists them."""
    choices = list(choices)
    if value not in choices:
        raise ValidationError({field: message or f"Pick one of: {', '.join(choices)}."})
    return str(value)


def role_field(value: object, *, roles: Iterable[str] = Membership.Role.values) -> str:
    return choice_field(value, field="role", choices=roles)


def list_field(value: object, *, field: str, message: str) -> list[Any]:
    """The items of a list. A string is iterable too, but it is one name, not
    a list of them."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValidationError({field: message})
    return list(value)


def expiry_field(value: object, *, field: str = "expires_at") -> datetime | None:
    """A moment in the future (a key's expiry), or None for never."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError({field: "A date and time."})
    if value <= timezone.now():
        raise ValidationError({field: "The expiry must be in the future."})
    return value


class FieldErrors:
    """The errors of several fields, gathered so that one
    :class:`ValidationError` names every field that failed (a form shows them
    all at once, not one per attempt), in the order they were checked."""

    def __init__(self) -> None:
        self.messages: dict[str, list[str]] = {}

    def __contains__(self, field: str) -> bool:
        return field in self.messages

    def check(self, check: Callable[[], T], default: T) -> T:
        """The value ``check`` returns, or ``default`` once its error is kept."""
        try:
            return check()
        except ValidationError as error:
            self.messages.update(error.message_dict)
            return default

    def add(self, field: str, message: str) -> None:
        self.messages[field] = [message]

    def raise_any(self) -> None:
        if self.messages:
            raise ValidationError(self.messages)


def all_errors(*checks: Callable[[], object]) -> list[object]:
    """The value of every check, or one error naming every field that failed."""
    errors = FieldErrors()
    values = [errors.check(check, None) for check in checks]
    errors.raise_any()
    return values


def fields_clean(data: Mapping[str, object], checks: Mapping[str, Check]) -> dict[str, Any]:
    """Each field given, through its check; a field without one cannot be
    changed. The first error stops: these fields are set one call at a time."""
    refuse_unknown(data, checks)
    return {field: checks[field](field, value) for field, value in data.items()}


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
