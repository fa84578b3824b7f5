"""Celery application: backend health checks, usage draining, retention purges."""

import logging
import os

from celery import Celery
from celery.beat import PersistentScheduler, ScheduleEntry
from celery.schedules import schedule as every

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("switchyard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

log = logging.getLogger("switchyard.beat")


class OncePerPeriodScheduler(PersistentScheduler):
    """Beat's scheduler, safe to run twice: an entry due in both beats is
    sent by the one that claims its period first (``responses_api.runtime.once``),
    so a second beat on another machine is a hot standby, not a duplicate."""

    def apply_entry(self, entry: ScheduleEntry, producer=None) -> None:
        from responses_api.runtime.once import claim

        period = entry.schedule.seconds if isinstance(entry.schedule, every) else None
        if period:
            try:
                claimed = claim(f"beat:{entry.name}", period)
            except Exception:  # Redis away: this turn is skipped, the next one retries
                log.warning("cannot claim %s's turn; skipped", entry.name, exc_info=True)
                return
            if not claimed:
                log.debug("%s was sent by another beat this period", entry.name)
                return
        super().apply_entry(entry, producer=producer)
