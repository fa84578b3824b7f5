"""What an organisation and its keys spent in a calendar month (UTC).

The one place that sums a month of usage rows: spend limits rebuild a
missing counter from :func:`month_spent`, the console shows both functions'
figures. Tokens are input + output tokens (reasoning is part of output),
cost is the rows' ``cost``; every row counts, whatever its status.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import F, Sum


def month_start(moment: datetime | float) -> datetime:
    """The first instant of the calendar month (UTC) that holds ``moment``."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, tz=UTC)
    moment = moment.astimezone(UTC)
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(start: datetime) -> datetime:
    return (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )


def _month_rows(organisation_id: int, month: datetime | float | None):
    from responses_api.models import UsageLog

    start = month_start(month if month is not None else datetime.now(UTC))
    return UsageLog.objects.filter(
        organisation_id=organisation_id, created_at__gte=start, created_at__lt=next_month(start)
    )


_TOTALS = {"cost": Sum("cost"), "tokens": Sum(F("input_tokens") + F("output_tokens"))}


def month_spent(
    organisation_id: int, api_key_id: str | None = None, *, month: datetime | float | None = None
) -> tuple[Decimal, int]:
    """(cost, tokens) of the organisation, or of one of its keys, in the
    month holding ``month`` (default: now)."""
    rows = _month_rows(organisation_id, month)
    if api_key_id is not None:
        rows = rows.filter(api_key_id=api_key_id)
    totals = rows.aggregate(**_TOTALS)
    return totals["cost"] or Decimal(0), totals["tokens"] or 0


def month_spent_by_key(
    organisation_id: int, *, month: datetime | float | None = None
) -> dict[str, tuple[Decimal, int]]:
    """(cost, tokens) per key id (as text) of the organisation's keys that
    were used in the month."""
    rows = _month_rows(organisation_id, month).filter(api_key_id__isnull=False)
    grouped = rows.values("api_key_id").order_by().annotate(**_TOTALS)
    return {str(r["api_key_id"]): (r["cost"] or Decimal(0), r["tokens"] or 0) for r in grouped}
