"""What an organisation and its keys spent in a calendar month (UTC).

The one place that sums a month of usage: spend limits rebuild a missing
counter from :func:`month_spent`, the console shows both functions' figures.
Tokens are input + output tokens (reasoning is part of output), cost is the
rows' ``cost``; every row counts, whatever its status. The sums are read from
the daily roll-up cells (``responses_api/usage/rollups.py``), which the usage writer
adds to in the transaction that inserts the rows: a month is about thirty
cells per model, key and backend, whatever the number of rows, and the
figure equals the rows' own sum.
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


def _month_cells(organisation_id: int, month: datetime | float | None):
    from responses_api.models import UsageDaily

    start = month_start(month if month is not None else datetime.now(UTC))
    return UsageDaily.objects.filter(
        organisation_id=organisation_id, bucket_start__gte=start, bucket_start__lt=next_month(start)
    )


_TOTALS = {"nanos": Sum("cost_nanos"), "tokens": Sum(F("input_tokens") + F("output_tokens"))}
NANOS = Decimal(1_000_000_000)


def _spent(totals: dict) -> tuple[Decimal, int]:
    return Decimal(totals["nanos"] or 0) / NANOS, int(totals["tokens"] or 0)


def month_spent(
    organisation_id: int, api_key_id: str | None = None, *, month: datetime | float | None = None
) -> tuple[Decimal, int]:
    """(cost, tokens) of the organisation, or of one of its keys, in the
    month holding ``month`` (default: now)."""
    cells = _month_cells(organisation_id, month)
    if api_key_id is not None:
        cells = cells.filter(api_key_id=api_key_id)
    return _spent(cells.aggregate(**_TOTALS))


def month_spent_by_key(
    organisation_id: int, *, month: datetime | float | None = None
) -> dict[str, tuple[Decimal, int]]:
    """(cost, tokens) per key id (as text) of the organisation's keys that
    were used in the month."""
    from responses_api.models import NO_ID

    cells = _month_cells(organisation_id, month).exclude(api_key_id=NO_ID)
    grouped = cells.values("api_key_id").order_by().annotate(**_TOTALS)
    return {str(r["api_key_id"]): _spent(r) for r in grouped}
