"""Usage rows: one per authenticated request, written off the request path.

The guarantee, with Redis (production): **a row the API has answered for is
in Redis before the response's last byte is sent, and leaves Redis only once
it is committed to the database** (or parked as unwritable, see below).

- ``Exchange.submit`` appends the row to the Redis stream ``switchyard:usage``
  (``XADD``) before the final body chunk, the final SSE event or the error
  response goes out; for a 499 as soon as the disconnect is seen. The append
  is shielded from cancellation. So a web process killed (even ``SIGKILL``)
  right after answering has already handed its row over.
- Writers — ``manage.py write_usage`` processes (as deployed), a task in
  every web process unless ``SWITCHYARD_USAGE_DRAIN_IN_WEB=false``, and the
  Celery ``drain_usage`` task every few seconds — read the stream through one
  consumer group and ``XACK`` entries only after the transaction inserting
  their rows committed.
- A writer that dies between reading and committing leaves its entries
  pending; any other writer takes them over with ``XAUTOCLAIM`` once they have
  been idle ``CLAIM_IDLE_MS``.
- Inserts ignore duplicate ``request_id`` values, so an entry written twice
  (claimed after its writer had in fact committed) is one row.
- Every value is made to fit its column before the insert
  (``responses_api/usage/sanitise.py``: NUL, lengths, ranges, NaN), so a
  hostile header or a backend's odd count costs no row.
- A row the database still refuses (its organisation was deleted meanwhile,
  an entry that is not JSON) does not hold the others back: its batch is
  written row by row, and it is kept as a dead letter
  (``responses_api/usage/deadletters.py``, ``manage.py usage_deadletters``), or on
  the ``switchyard:usage:dead`` stream if even that table refuses it. A
  database that is down or locked is not such a case: nothing is
  acknowledged, and writers retry with a backoff.

Rows are lost only if Redis loses acknowledged writes: run it with AOF
(``appendonly yes``) where that matters.

Without Redis (the embedded default, one process) rows wait in process memory
for about ``FLUSH_INTERVAL`` seconds before a batch insert, and are written at
interpreter exit (and at SIGTERM, ``responses_api/gateway/draining.py``); a crash of
the process loses at most that fraction of a second of rows. The same
sanitising, row-by-row retry and dead letters apply.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
import redis.exceptions
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction

from responses_api.runtime import redis_conn
from responses_api.usage.deadletters import (
    Refusal,
    database_unavailable,
    deadletters_add,
    row_encode,
)
from responses_api.usage.insert import insert_rows
from responses_api.usage.sanitise import json_clean

log = logging.getLogger(__name__)

STREAM = os.environ.get("SWITCHYARD_USAGE_STREAM", "switchyard:usage")
GROUP = "writers"
BATCH = 500
CLAIM_IDLE_MS = 30_000
FLUSH_INTERVAL = 0.2
MAX_BACKOFF = 30.0


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError


def encode_row(row: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(row, default=_default)
    except TypeError:
        # A lone surrogate or an integer past 64 bits, which JSON cannot
        # carry: made JSON here, repaired to fit the columns by the writer.
        return orjson.dumps(json_clean(row))


def _commit(rows: list[dict[str, Any]]) -> None:
    from responses_api.usage.rollups import rollups_add

    with transaction.atomic():
        inserted = insert_rows(rows)
        rollups_add(inserted)
        _touch_keys(inserted)


def rows_commit(rows: list[dict[str, Any]]) -> list[Refusal]:
    """Write the rows; returns those the database refused. A database that
    is unavailable raises (``deadletters.database_unavailable``); any other
    error is taken as a row's."""
    try:
        _commit(rows)
        return []
    except Exception as exc:
        if database_unavailable(exc):
            raise
        if len(rows) == 1:
            return [Refusal.of(rows[0], exc)]
    # One bad row must not hold the others back: one transaction per row.
    refused: list[Refusal] = []
    for row in rows:
        try:
            _commit([row])
        except Exception as exc:
            if database_unavailable(exc):
                raise
            refused.append(Refusal.of(row, exc))
    return refused


def write_rows(
    rows: list[dict[str, Any]],
    *,
    unstored: Callable[[list[Refusal]], None] | None = None,
) -> list[dict[str, Any]]:
    """Insert rows (idempotent on request_id), add those inserted to the
    roll-ups and touch their keys' last use, in one transaction: once a row
    is visible, its writer is done with it, and it is counted exactly once.

    Rows the database refuses are kept as dead letters, and returned;
    ``unstored`` takes those that even the dead letters' table refused
    (without it they are logged as lost). A database that is down raises
    instead, so the caller keeps the rows and retries: rows committed
    before it went down are not written twice."""
    if not rows:
        return []
    refused = rows_commit(rows)
    if refused:
        left = deadletters_add(refused=refused)
        if left and unstored is not None:
            unstored(left)
        else:
            for refusal in left:
                log.error(
                    "usage row %s lost: refused (%s) and not kept",
                    refusal.row.get("request_id"),
                    refusal.reason,
                )
    return [refusal.row for refusal in refused]


def _touch_keys(rows: list[dict[str, Any]]) -> None:
    """Each key's last use, from the rows as inserted (repaired values)."""
    from accounts.models import ApiKey

    last_use: dict[Any, datetime] = {}
    for row in rows:
        key = row.get("api_key_id")
        if key:
            stamp = row["created_at"]
            if key not in last_use or stamp > last_use[key]:
                last_use[key] = stamp
    for key, stamp in last_use.items():
        ApiKey.objects.filter(pk=key).update(last_used_at=stamp)


# --- Redis stream ------------------------------------------------------------


def _consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _ensure_group(client) -> None:
    import redis

    try:
        client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def dead_letter_stream() -> str:
    return STREAM + ":dead"


def drain_redis(
    client,
    *,
    consumer: str | None = None,
    block_ms: int | None = None,
    claim_idle_ms: int = CLAIM_IDLE_MS,
) -> int:
    """Move rows from the Redis stream into the database; returns entries handled.

    Entries are acknowledged only once their rows are committed (or, for a
    row the database refuses, kept as a dead letter), so a writer that dies
    mid-way leaves them pending for another to claim."""
    consumer = consumer or _consumer_name()
    _ensure_group(client)
    # First, entries a dead (or stuck) writer left pending for too long.
    _, claimed, *_ = client.xautoclaim(STREAM, GROUP, consumer, claim_idle_ms, "0-0", count=BATCH)
    batches = [claimed] if claimed else []
    response = client.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=BATCH, block=block_ms)
    for _, entries in response or ():
        batches.append(entries)
    handled = 0

    def park(refused: list[Refusal]) -> None:
        """The last resort, for rows even the dead letters' table refused."""
        for refusal in refused:
            raw = row_encode({"row": refusal.row, "error": refusal.reason})
            client.xadd(dead_letter_stream(), {"r": raw}, maxlen=100_000, approximate=True)

    for entries in batches:
        rows: list[dict[str, Any]] = []
        undecodable: list[Refusal] = []
        for entry_id, fields in entries:
            try:
                row = orjson.loads(fields[b"r"])
                if not isinstance(row, dict):
                    raise TypeError("not a JSON object")
                rows.append(row)
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                text = repr(fields)[:2000]
                entry = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                undecodable.append(Refusal.of({"undecodable": text, "entry": entry}, exc))
        if undecodable:
            park(deadletters_add(refused=undecodable))
        write_rows(rows, unstored=park)
        ids = [entry_id for entry_id, _ in entries]
        # Acknowledge only after the rows are committed.
        client.xack(STREAM, GROUP, *ids)
        client.xdel(STREAM, *ids)
        handled += len(ids)
    return handled


def redis_client():
    from responses_api.runtime.redis_conn import sync_client

    return sync_client()


_Writer = tuple["asyncio.Task[None]", asyncio.Event]


class UsageSink:
    """Per-process entry point: ``sink.submit(row)`` (see there)."""

    def __init__(self) -> None:
        # Rows come from every thread with a loop: a deque takes and gives them atomically.
        self.pending: deque[dict[str, Any]] = deque()
        atexit.register(self.flush_at_exit)
        # A writer task per loop, woken by its own loop's event (another thread's wakes nothing).
        self._writers: dict[asyncio.AbstractEventLoop, _Writer] = {}

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
                [("XADD", STREAM, "*", "r", encode_row(row)), *then], scripts
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
            written += await sync_to_async(_drain_once, thread_sensitive=False)()
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


_redis_sync = None


def _drain_once() -> int:
    global _redis_sync
    if _redis_sync is None:
        _redis_sync = redis_client()
    from django.db import close_old_connections

    close_old_connections()
    try:
        total = 0
        while True:
            handled = drain_redis(_redis_sync)
            total += handled
            if handled < BATCH:
                return total
    finally:
        close_old_connections()


sink = UsageSink()
