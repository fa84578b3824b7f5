"""The per-process entry point of usage rows: ``sink.submit(row)`` hands a
row over, to the Redis stream or, without Redis or while it is out of reach,
to this process's memory, from which a writer task per event loop writes it
(``usage.writer`` says what is guaranteed)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Sequence
from typing import Any

import redis.exceptions
from asgiref.sync import sync_to_async
from django.conf import settings

from responses_api.runtime import redis_conn
from responses_api.usage.writer import (
    FLUSH_INTERVAL,
    MAX_BACKOFF,
    drain_once,
    encode_row,
    stream,
    write_rows,
)

log = logging.getLogger(__name__)

_Writer = tuple["asyncio.Task[None]", asyncio.Event]


class UsageSink:
    """Per-process entry point: ``sink.submit(row)`` (see there)."""

    def __init__(self) -> None:
        # Rows come from every thread with a loop: a deque takes and gives them atomically.
        self.pending: deque[dict[str, Any]] = deque()
        atexit.register(self.flush_at_exit)
        # A writer task per loop, woken by its own loop's event (another thread's wakes nothing).
        self._writers: dict[asyncio.AbstractEventLoop, _Writer] = {}

    def full(self) -> bool:
        """Whether the rows no store took reached ``SWITCHYARD_USAGE_PENDING_MAX``."""
        return len(self.pending) >= settings.SWITCHYARD_USAGE_PENDING_MAX

    def _ensure_task(self) -> None:
        if settings.REDIS_URL and not settings.SWITCHYARD_USAGE_DRAIN_IN_WEB and not self.pending:
            return  # Celery's drain_usage writes the rows
        loop = asyncio.get_running_loop()
        if (writer := self._writers.get(loop)) is not None and not writer[0].done():
            return
        wake = asyncio.Event()
        task = loop.create_task(self._run(wake), name="switchyard-usage-writer")
        live = {other: w for other, w in self._writers.items() if not w[0].done()}
        self._writers = {**live, loop: (task, wake)}  # without those of loops that closed

    def submit(
        self,
        row: dict[str, Any],
        scripts: Sequence[redis_conn.ScriptCall] = (),
        then: Sequence[Sequence[Any]] = (),
    ) -> Awaitable[None] | None:
        """Hand a row over: the append to the Redis stream to await, or None
        when the row is already held in memory (the embedded default), so
        that case costs the request no task. ``scripts`` (the spend
        counters' increments) and ``then`` (commands giving back what the
        request held) go to Redis in the append's round trip, ``then`` after
        the row: a connection lost half-way keeps a lease (it expires) rather
        than the row."""
        self._ensure_task()
        if settings.REDIS_URL:
            return self._append(row, scripts, then)
        self.pending.append(row)
        self._wake_writer()
        return None

    async def _append(
        self,
        row: dict[str, Any],
        scripts: Sequence[redis_conn.ScriptCall] = (),
        then: Sequence[Sequence[Any]] = (),
    ) -> None:
        # In the round trip of every request ending in the same turn of the loop.
        try:
            await redis_conn.run_batch(
                [("XADD", stream(), "*", "r", encode_row(row)), *then], scripts
            )
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            # Redis is out of reach: this process writes the row itself
            # (inserts are idempotent on request_id, should the append have
            # landed after all). What ``then`` gave back expires instead.
            log.warning("usage row %s kept in memory: Redis: %s", row["request_id"], exc)
            self.pending.append(row)
            self._ensure_task()
        self._wake_writer()

    def _wake_writer(self) -> None:
        if (writer := self._writers.get(asyncio.get_running_loop())) is not None:
            writer[1].set()

    async def _run(self, wake: asyncio.Event) -> None:
        backoff = 0.0
        while True:
            # asyncio.timeout, not wait_for: on Python 3.11, wait_for returns
            # when the wake and a cancellation come in the same turn, and the
            # task would outlive its loop's shutdown.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    await wake.wait()
            wake.clear()
            await asyncio.sleep(FLUSH_INTERVAL)
            try:
                await self.flush()
            except Exception:
                # The database (or Redis) is down or locked: the rows are
                # kept (in memory, or pending in the stream) for the next try.
                backoff = min(max(backoff * 2, 1.0), MAX_BACKOFF)
                log.exception("usage rows could not be written; retrying in %g s", backoff)
                await asyncio.sleep(backoff)
                self._wake_writer()
            else:
                backoff = 0.0

    def flush_at_exit(self) -> None:
        """Embedded default: write what is still in memory when the process exits."""
        rows = [self.pending.popleft() for _ in range(len(self.pending))]
        if rows:
            try:
                write_rows(rows)
            except Exception:
                log.exception("%d usage rows could not be written at exit", len(rows))

    async def flush(self) -> int:
        written = await self._write_pending()
        if settings.REDIS_URL:
            written += await sync_to_async(drain_once, thread_sensitive=False)()
        return written

    async def _write_pending(self) -> int:
        """The rows held in memory: all of them in the embedded default, and
        with Redis those its stream could not take."""
        rows = [self.pending.popleft() for _ in range(len(self.pending))]
        if not rows:
            return 0
        try:
            # Refused rows become dead letters; only an unavailable
            # database raises here.
            await sync_to_async(write_rows)(rows)
        except Exception:
            self.pending.extendleft(reversed(rows))
            raise
        return len(rows)


sink = UsageSink()
