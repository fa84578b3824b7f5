"""Number formatting for console pages."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def compact(value) -> str:
    """12345 → 12.3k; 1234567 → 1.2M."""
    if value is None:
        return "–"
    value = float(value)
    for limit, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}".rstrip("0").rstrip(".") + suffix
    return str(int(value)) if value == int(value) else f"{value:.1f}"


@register.filter
def pct(value) -> str:
    if value is None:
        return "–"
    return f"{100 * float(value):.1f}%"


@register.filter
def ms(value) -> str:
    """Milliseconds, or seconds past 10 s."""
    if value is None:
        return "–"
    value = float(value)
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"


@register.filter
def status_class(status) -> str:
    status = int(status or 0)
    if status == 499:
        return "s499"
    return f"s{status // 100}xx"


@register.filter
def money(value) -> str:
    """An amount in the price currency: cents, or more digits when it has them."""
    if value is None:
        return "–"
    from decimal import Decimal

    from responses_api.usage.spend import money as as_money

    return as_money(Decimal(value))


@register.filter
def utc(value) -> str:
    """A moment as the rest of the console shows it, seconds and all; the
    trace's values arrive as ISO strings, the models' as datetimes."""
    if value in (None, ""):
        return "–"
    moment = _moment(value)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment is not None else str(value)


@register.filter
def iso(value) -> str:
    """The exact moment, for a ``<time datetime>`` or a title."""
    moment = _moment(value)
    return moment.isoformat() if moment is not None else ""


def _moment(value):
    from datetime import UTC, datetime

    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


@register.filter
def audit_lines(details) -> list[tuple[str, str]]:
    """An audit entry's details as ``(field, what happened)`` lines, read by
    people rather than Python: ``{"changed": {"name": ["a", "b"]}}`` is
    ``name: a → b``, a list of changed fields is named, a role change
    ``from``/``to`` is one arrow."""
    if not isinstance(details, dict):
        return [("", _plain(details))] if details else []
    lines: list[tuple[str, str]] = []
    rest = dict(details)
    if "from" in rest and "to" in rest:
        lines.append(("", f"{_plain(rest.pop('from'))} → {_plain(rest.pop('to'))}"))
    changed = rest.pop("changed", None)
    if isinstance(changed, dict):
        for field, value in changed.items():
            if isinstance(value, list | tuple) and len(value) == 2:
                before, after = (_plain(v, field) for v in value)
                lines.append((field, f"{before} → {after}"))
            else:
                lines.append((field, _plain(value, field)))
    elif changed:
        lines.append(("changed", _plain(changed)))
    lines.extend((field, _plain(value, field)) for field, value in rest.items())
    return lines


# Amounts the audit keeps as text with the column's scale ("50.000000").
_MONEY_FIELDS = ("monthly_budget", "price_input", "price_cached_input", "price_output")


def _plain(value, field: str = "") -> str:
    if value is None or value == "":
        return "–"
    if field in _MONEY_FIELDS and isinstance(value, str | int | float):
        try:
            return money(value)
        except ArithmeticError:
            return str(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if field.endswith("_ms") and isinstance(value, int | float):
        return ms(value)
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items()) if value else "none"
    return str(value)


@register.filter
def password_changeable(user) -> bool:
    """Whether a password change is any use to ``user``: not for an account
    made by single sign-on, nor for anyone while passwords are off."""
    from django.conf import settings

    return bool(user.has_usable_password() and settings.SWITCHYARD_PASSWORD_LOGIN)


@register.simple_tag(takes_context=True)
def currency(context) -> str:
    """The code of the currency the page's amounts are in: the one the view
    names (a support person reads other organisations' rows), else the
    current organisation's."""
    named = context.get("currency")
    if named:
        return named
    console = getattr(context.get("request"), "console", None)
    organisation = getattr(console, "organisation", None)
    return organisation.currency if organisation is not None else ""
