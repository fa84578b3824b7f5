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
