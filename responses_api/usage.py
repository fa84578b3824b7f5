"""Usage rows: one per authenticated request, written off the request path.

Guarantee. With Redis (production), a row is appended to the Redis stream
``switchyard:usage`` *before* the response's last byte is sent (for a 499,
as soon as the disconnect is seen). Writers — a task in every web process
and the Celery ``drain_usage`` task — read the stream through a consumer
group and acknowledge entries only after the database transaction that
inserts them has committed. If a writer dies between reading and
committing, its entries stay pending and another writer claims them after
``CLAIM_IDLE_MS``. Inserts ignore duplicate ``request_id`` values, so a
claimed batch that had in fact been committed is not written twice. Rows are
therefore lost only if Redis itself loses data (run it with AOF for that).

Without Redis (the embedded default) rows wait in process memory for at most
``FLUSH_INTERVAL`` seconds and are flushed on shutdown; a crash of the
process can lose that fraction of a second of rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction

log = logging.getLogger(__name__)

STREAM = os.environ.get("SWITCHYARD_USAGE_STREAM", "switchyard:usage")
GROUP = "writers"
BATCH = 500
CLAIM_IDLE_MS = 30_000
FLUSH_INTERVAL = 0.2

_FIELDS = {
    "request_id",
    "organisation_id",
    "api_key_id",
    "key_prefix",
    "model",
    "backend_id",
    "backend_name",
    "endpoint",
    "method",
    "stream",
    "status",
    "error_code",
    "error_message",
    "note",
    "notices",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost",
    "attempts",
    "queue_wait_ms",
    "ttft_ms",
    "duration_ms",
    "tokens_per_second",
    "client_ip",
    "user_agent",
    "created_at",
    "finished_at",
}


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError


def encode_row(row: dict[str, Any]) -> bytes:
    return orjson.dumps(row, default=_default)


def _to_model(row: dict[str, Any]):
    from responses_api.models import UsageLog

    data = {k: v for k, v in row.items() if k in _FIELDS}
    for stamp in ("created_at", "finished_at"):
        if isinstance(data.get(stamp), int | float):
            data[stamp] = datetime.fromtimestamp(data[stamp], tz=UTC)
    if data.get("error_message"):
        data["error_message"] = data["error_message"][:2000]
    if data.get("user_agent"):
        data["user_agent"] = data["user_agent"][:300]
    return UsageLog(**data)


def write_rows(rows: list[dict[str, Any]]) -> int:
    """Insert rows (idempotent on request_id) and touch their keys' last use."""
    from accounts.models import ApiKey
    from responses_api.models import UsageLog

    if not rows:
        return 0
    objects = [_to_model(r) for r in rows]
    try:
        with transaction.atomic():
            UsageLog.objects.bulk_create(objects, ignore_conflicts=True, batch_size=BATCH)
    except IntegrityError:
        # One bad row (its organisation deleted meanwhile) must not block the
        # batch forever: insert one by one and report the rows that can't go in.
        for obj in objects:
            try:
                with transaction.atomic():
                    UsageLog.objects.bulk_create([obj], ignore_conflicts=True)
            except IntegrityError:
                log.error("usage row %s dropped: its organisation or key is gone", obj.request_id)
    with transaction.atomic():
        last_use: dict[str, float] = {}
        for r in rows:
            key = r.get("api_key_id")
            if key:
                last_use[key] = max(last_use.get(key, 0.0), float(r.get("created_at") or 0))
        for key, stamp in last_use.items():
            ApiKey.objects.filter(pk=key).update(last_used_at=datetime.fromtimestamp(stamp, tz=UTC))
    return len(objects)


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


def drain_redis(client, *, consumer: str | None = None, block_ms: int | None = None) -> int:
    """Move rows from the Redis stream into the database; returns rows written."""
    consumer = consumer or _consumer_name()
    _ensure_group(client)
    written = 0
    # First, entries a dead writer left pending.
    _, claimed, *_ = client.xautoclaim(STREAM, GROUP, consumer, CLAIM_IDLE_MS, "0-0", count=BATCH)
    batches = [claimed] if claimed else []
    response = client.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=BATCH, block=block_ms)
    for _, entries in response or ():
        batches.append(entries)
    for entries in batches:
        ids = [entry_id for entry_id, _ in entries]
        rows = [orjson.loads(fields[b"r"]) for _, fields in entries if fields and b"r" in fields]
        written += write_rows(rows)
        # Acknowledge only after the rows are committed.
        client.xack(STREAM, GROUP, *ids)
        client.xdel(STREAM, *ids)
    return written


def redis_client():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


class UsageSink:
    """Per-process entry point: ``await sink.submit(row)``."""

    def __init__(self) -> None:
        self.pending: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._redis = None

    def _ensure_task(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            self._loop = loop
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run(), name="switchyard-usage-writer")

    async def submit(self, row: dict[str, Any]) -> None:
        self._ensure_task()
        if settings.REDIS_URL:
            if self._redis is None or self._redis_loop is not self._loop:
                import redis.asyncio

                # Blocking pool: a thousand streams ending together wait for
                # one of the connections instead of failing (the default pool
                # raises "Too many connections" past 100, losing the row).
                pool = redis.asyncio.BlockingConnectionPool.from_url(
                    settings.REDIS_URL, max_connections=100, timeout=30
                )
                self._redis = redis.asyncio.Redis(connection_pool=pool)
                self._redis_loop = self._loop
            await self._redis.xadd(STREAM, {"r": encode_row(row)})
        else:
            self.pending.append(row)
        assert self._wake is not None
        self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=5.0)
            self._wake.clear()
            await asyncio.sleep(FLUSH_INTERVAL)
            try:
                await self.flush()
            except Exception:
                log.exception("usage rows could not be written; retrying")
                await asyncio.sleep(1.0)

    async def flush(self) -> int:
        if settings.REDIS_URL:
            return await sync_to_async(_drain_once, thread_sensitive=False)()
        rows, self.pending = self.pending, []
        if not rows:
            return 0
        try:
            return await sync_to_async(write_rows)(rows)
        except Exception:
            self.pending[:0] = rows
            raise


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
            written = drain_redis(_redis_sync)
            total += written
            if written < BATCH:
                return total
    finally:
        close_old_connections()


UsageSink._redis_loop = None  # type: ignore[attr-defined]
sink = UsageSink()
