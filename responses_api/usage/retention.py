"""Usage retention: raw rows live ``usage_retention_days``, roll-ups 400 days.

The purge deletes by primary key, at most ``batch`` rows per statement, each
statement its own short transaction: it locks only the old rows it deletes,
which no writer touches (writers insert new rows and upsert current cells),
so the API's usage writers never wait on it. The rows are found through the
``(organisation, created_at)`` index, oldest first.

Monthly partitions would turn the purge into a ``DROP`` of a month, but a
retention counted in days, per organisation, does not fall on partition
bounds, and the batched delete already costs little (see bench/README.md,
"Console at scale").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from accounts.models import Organisation
from responses_api.models import UsageDaily, UsageHourly, UsageLog

BATCH = 5000
ROLLUP_DAYS = 400


@dataclass
class Purged:
    rows: int = 0
    cells: int = 0


def usage_purge(*, now: datetime | None = None, batch: int = BATCH) -> Purged:
    """Delete each organisation's usage rows older than its retention, and
    roll-up cells older than :data:`ROLLUP_DAYS`."""
    now = now or timezone.now()
    purged = Purged()
    for org_id, days in Organisation.objects.values_list("id", "usage_retention_days"):
        if days:
            old = UsageLog.objects.filter(
                organisation_id=org_id, created_at__lt=now - timedelta(days=days)
            )
            purged.rows += _delete(old, order="created_at", batch=batch)
        for table in (UsageHourly, UsageDaily):
            cells = table.objects.filter(
                organisation_id=org_id, bucket_start__lt=now - timedelta(days=ROLLUP_DAYS)
            )
            purged.cells += _delete(cells, order="bucket_start", batch=batch)
    return purged


def _delete(queryset, *, order: str, batch: int) -> int:
    """``DELETE … WHERE id IN (ids of the oldest ``batch``)`` until nothing
    matches. Nothing references these rows and no signal listens, so Django
    deletes them in one statement without loading them."""
    deleted = 0
    model = queryset.model
    while True:
        ids = list(queryset.order_by(order).values_list("id", flat=True)[:batch])
        if not ids:
            return deleted
        deleted += model._base_manager.filter(id__in=ids).delete()[0]
