"""Usage rows made storable: every value fits its column, on SQLite and PostgreSQL.

A row's values come from the client (headers, ``prompt_cache_key``, the
path, the model name), from the backend (token counts) and from arithmetic
on them (cost, rates). None of them may cost the row: a NUL that PostgreSQL
refuses in text, a count a backend reports as ``-5`` or ``2**40``, a rate
that came out ``inf``. So each value is repaired, not rejected:

- text: NUL becomes U+FFFD (so ``a\\0b`` stays distinct from ``ab``, and
  the row shows that something was there), a lone surrogate (which no
  database encoding takes) becomes ``?``, and the string is cut to the
  column's ``max_length``; a value that is not text is written as text;
- integers: clamped to the column's range (a positive column's negative
  value becomes 0), a non-integer is converted if it can be, else the default;
- floats: NaN and ±inf become NULL (0 in a column that takes no NULL);
- decimals: clamped to what ``max_digits``/``decimal_places`` hold;
- JSON: the same rules applied to every string and float inside;
- an IP address that does not parse, a nullable key that is not a key: NULL;
- a ``request_id`` that is no UUID: a UUID derived from it (``uuid5``), so
  that writing the row twice still makes one row.

Only what no repair can give stays refused: the organisation of the row
does not exist (deleted meanwhile). Such a row goes to the dead letters
(``responses_api/usage/deadletters.py``).

The rules come from ``UsageLog._meta``, so a new column is covered by its
field's type. A row of ordinary values takes the fast path of each rule (a
type test and a comparison); the UUIDs and the decimal it converts are
values the column conversions would otherwise have parsed themselves.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations
from django.utils import timezone

REPLACEMENT = "\ufffd"
# Undecodable ids still name one row: the same text, the same UUID.
_REQUEST_ID_NAMESPACE = uuid.UUID("6c1f3d0e-8d0a-4c55-9a53-5f0f4bd1d6a0")
_JSON_DEPTH = 32
_INT64 = (-(2**63), 2**63 - 1)

Fix = Callable[[Any], Any]


def text_clean(value: str, max_length: int | None = None) -> str:
    """``value`` with NUL replaced, lone surrogates replaced, cut to ``max_length``."""
    if "\x00" in value:
        value = value.replace("\x00", REPLACEMENT)
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            value = value.encode(errors="replace").decode()
    if max_length is not None and len(value) > max_length:
        value = value[:max_length]
    return value


def _empty(field: models.Field) -> Any:
    """What a NOT NULL column gets for a missing or unusable value."""
    if field.has_default():
        return field.get_default()
    if isinstance(field, models.CharField | models.TextField):
        return ""
    if isinstance(field, models.BooleanField):
        return False
    if isinstance(field, models.DecimalField):
        return Decimal(0)
    if isinstance(field, models.FloatField):
        return 0.0
    if field.get_internal_type() in BaseDatabaseOperations.integer_field_ranges:
        return 0
    return None


def _text(field: models.Field) -> Fix:
    max_length = field.max_length
    null = field.null

    def fix(value: Any) -> Any:
        if type(value) is not str:
            if value is None:
                return None if null else ""
            value = str(value)
        if "\x00" in value or not value.isascii() or (max_length and len(value) > max_length):
            return text_clean(value, max_length)
        return value

    return fix


def _integer(field: models.Field) -> Fix:
    low, high = BaseDatabaseOperations.integer_field_ranges[field.get_internal_type()]
    null = field.null
    empty = _empty(field)

    def fix(value: Any) -> Any:
        if type(value) is not int:
            if value is None:
                return None if null else empty
            try:
                value = int(value)
            except (TypeError, ValueError, OverflowError):  # "abc", NaN, inf
                return None if null else empty
        if value < low:
            return low
        if value > high:
            return high
        return value

    return fix


def _float(field: models.Field) -> Fix:
    empty = None if field.null else 0.0

    def fix(value: Any) -> Any:
        if type(value) is not float:
            if value is None:
                return empty
            try:
                value = float(value)
            except (TypeError, ValueError, OverflowError):
                return empty
        return value if math.isfinite(value) else empty

    return fix


def _decimal(field: models.DecimalField) -> Fix:
    assert field.max_digits is not None and field.decimal_places is not None
    places = field.decimal_places
    most = Decimal(10) ** (field.max_digits - places) - Decimal(10) ** -places
    empty = None if field.null else Decimal(0)

    def fix(value: Any) -> Any:
        if type(value) is not Decimal:
            if value is None:
                return empty
            try:
                value = Decimal(repr(value) if type(value) is float else str(value))
            except InvalidOperation:
                return empty
        if not value.is_finite():
            return empty
        if value > most:
            return most
        if value < -most:
            return -most
        return value

    return fix


def _boolean(field: models.Field) -> Fix:
    empty = None if field.null else False

    def fix(value: Any) -> Any:
        if type(value) is bool:
            return value
        return empty if value is None else bool(value)

    return fix


def _uuid(field: models.Field, *, derive: bool) -> Fix:
    """A UUID column; ``derive``: an unparsable value names a UUID of its own
    (the request id), else it is NULL (a key or backend that cannot exist)."""
    null = field.null

    def fix(value: Any) -> Any:
        if value is None or isinstance(value, uuid.UUID):
            return value
        try:
            return uuid.UUID(str(value))
        except (ValueError, AttributeError):
            if derive:
                return uuid.uuid5(_REQUEST_ID_NAMESPACE, text_clean(str(value)))
            return None if null else value

    return fix


def _datetime(field: models.Field) -> Fix:
    null = field.null

    def fix(value: Any) -> Any:
        if isinstance(value, datetime):
            return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)
        if value is not None:
            try:
                if isinstance(value, str):
                    parsed = datetime.fromisoformat(value)
                    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)
                return datetime.fromtimestamp(float(value), tz=UTC)
            except (TypeError, ValueError, OverflowError, OSError):
                pass
        return None if null else datetime.now(tz=UTC)

    return fix


@functools.lru_cache(maxsize=4096)
def _ip_address(value: Any) -> str | None:
    """``value`` as an address's text, or None. Cached: a client's address
    repeats over its requests, and parsing one costs more than the rest of
    the row's checks together."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _ip(field: models.Field) -> Fix:
    def fix(value: Any) -> Any:
        if value is None:
            return None
        if type(value) is not str:
            value = str(value)
        return _ip_address(value)

    return fix


def json_clean(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON every database stores: no NUL (PostgreSQL's
    ``jsonb`` refuses ``\\u0000``), no NaN or infinity, only JSON types."""
    if value is None or type(value) is bool:
        return value
    if type(value) is int:  # JSON encoders stop at 64 bits
        return min(max(value, _INT64[0]), _INT64[1])
    if type(value) is str:
        return text_clean(value)
    if type(value) is float:
        return value if math.isfinite(value) else None
    if depth >= _JSON_DEPTH:
        return None
    if isinstance(value, dict):
        return {text_clean(str(k)): json_clean(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_clean(v, depth + 1) for v in value]
    return text_clean(str(value))


def _json(field: models.Field) -> Fix:
    empty = _empty(field)

    def fix(value: Any) -> Any:
        if not value:
            return empty if value is None and not field.null else value
        # The usual value, a list of notice codes, as it is.
        if type(value) is list and all(
            type(v) is str and "\x00" not in v and v.isascii() for v in value
        ):
            return value
        return json_clean(value)

    return fix


def _foreign_key(field: models.ForeignKey) -> Fix:
    target = field.target_field
    if isinstance(target, models.UUIDField):
        return _uuid(field, derive=False)
    if target.get_internal_type() in BaseDatabaseOperations.integer_field_ranges:
        low, high = BaseDatabaseOperations.integer_field_ranges[target.get_internal_type()]
        null = field.null

        def fix(value: Any) -> Any:
            if type(value) is int and low <= value <= high:
                return value
            try:
                number = int(value)
            except (TypeError, ValueError, OverflowError):
                # No such row can exist: NULL where allowed, else refused.
                return None if null else value
            return number if low <= number <= high else (None if null else value)

        return fix
    return lambda value: value


def fixer(field: models.Field) -> Fix | None:
    """The repair of ``field``'s values, by the field's type."""
    if isinstance(field, models.ForeignKey):
        return _foreign_key(field)
    if isinstance(field, models.JSONField):
        return _json(field)
    if isinstance(field, models.GenericIPAddressField):
        return _ip(field)
    if isinstance(field, models.UUIDField):
        return _uuid(field, derive=field.unique)
    if isinstance(field, models.DateTimeField):
        return _datetime(field)
    if isinstance(field, models.DecimalField):
        return _decimal(field)
    if isinstance(field, models.FloatField):
        return _float(field)
    if isinstance(field, models.BooleanField):
        return _boolean(field)
    if field.get_internal_type() in BaseDatabaseOperations.integer_field_ranges:
        return _integer(field)
    if isinstance(field, models.CharField | models.TextField):
        return _text(field)
    return None


class RowSanitiser:
    """Repairs a usage row's values in place, one rule per column of ``model``."""

    def __init__(self, model: type[models.Model]) -> None:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        self.fixes: dict[str, Fix] = {}
        for field in fields:
            fix = fixer(field)
            if fix is not None:
                self.fixes[field.attname] = fix
        # NOT NULL columns without a default: a row missing one gets the
        # column's empty value, except keys (a row without its organisation
        # or its request id is refused, not invented).
        self.required = [
            (f.attname, _empty(f))
            for f in fields
            if not f.null
            and not f.has_default()
            and not f.is_relation
            and not isinstance(f, models.UUIDField)
            and _empty(f) is not None
        ]

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        fixes = self.fixes
        for name, value in data.items():
            fix = fixes.get(name)
            if fix is not None:
                fixed = fix(value)
                if fixed is not value:
                    data[name] = fixed
        for name, empty in self.required:
            if data.get(name) is None:
                data[name] = empty
        return data
