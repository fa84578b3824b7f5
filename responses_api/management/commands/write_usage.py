"""Write usage rows from the Redis stream into the database until stopped.

A web process that writes its own rows runs each batch's conversions and
statements on a thread of its own interpreter, and while a batch is written
the event loop shares the interpreter with it: at high rates, every request
in flight then waits longer (bench/README.md, §34). Deployments run this
command as its own process and start web processes with
``SWITCHYARD_USAGE_DRAIN_IN_WEB=false``; the Celery ``drain_usage`` task
stays the safety net for a writer that is down.

Several writers may run: they share the stream's consumer group, and a row
read by a writer that died is taken over by another (``responses_api/usage/writer.py``).
On SIGTERM or SIGINT the batch being written is committed and acknowledged
before the process exits. A row the database refuses becomes a dead letter
(``manage.py usage_deadletters``); while the database or Redis is down, the
writer retries with a backoff doubling up to 30 s, and keeps every row.
"""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, close_old_connections

log = logging.getLogger("switchyard.usage")

# How long a read of the stream waits on Redis for new rows.
BLOCK_MS = 1000


class Command(BaseCommand):
    help = "Write usage rows from the Redis stream into the database, until stopped."

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval",
            type=float,
            default=0.2,
            help="seconds to let rows gather after a batch smaller than the largest (default 0.2)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        import redis

        from responses_api.usage import writer as usage

        if not settings.REDIS_URL:
            raise CommandError(
                "write_usage reads the usage stream in Redis: set REDIS_URL "
                "(without Redis, each web process writes its own rows)"
            )
        stopping: list[int] = []

        def stop(signum: int, _frame: FrameType | None) -> None:
            stopping.append(signum)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        client = usage.redis_client(block_ms=BLOCK_MS)
        interval = max(options["interval"], 0.0)
        written = 0
        log.info("usage writer started on stream %s", usage.stream())
        backoff = 0.0
        while not stopping:
            close_old_connections()
            try:
                handled = usage.drain_redis(client, block_ms=BLOCK_MS)
            except (redis.RedisError, DatabaseError) as exc:
                # Redis or the database is down (a row the database refuses
                # is a dead letter, not an error here). Nothing was
                # acknowledged: the rows stay in the stream.
                backoff = min(max(backoff * 2, 1.0), usage.MAX_BACKOFF)
                log.warning(
                    "usage rows could not be written (%s); retrying in %g s",
                    type(exc).__name__,
                    backoff,
                )
                _pause(backoff, stopping)
                continue
            backoff = 0.0
            written += handled
            if handled and handled < usage.BATCH and not stopping:
                time.sleep(interval)
        close_old_connections()
        log.info("usage writer stopped after %d rows", written)


def _pause(seconds: float, stopping: list[int]) -> None:
    """Sleep, but stop at once on SIGTERM: nothing is held meanwhile."""
    deadline = time.monotonic() + seconds
    while not stopping and time.monotonic() < deadline:
        time.sleep(min(0.2, seconds))
