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

Rows are lost only if Redis loses acknowledged writes: run it with AOF (``appendonly yes``).

``usage.sink`` hands the rows over (the Redis append, or memory); this module
writes them and drains the stream.

Without Redis (the embedded default, one process) rows wait in process memory
for about ``FLUSH_INTERVAL`` seconds before a batch insert, and are written at
interpreter exit (and at SIGTERM, ``responses_api/pipeline/draining.py``); a crash of
the process loses at most that fraction of a second of rows. The same
sanitising, row-by-row retry and dead letters apply.

Past ``SWITCHYARD_USAGE_PENDING_MAX`` rows in memory, new requests are refused
before they are authenticated, so they make none (:meth:`UsageSink.full`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
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

GROUP = "writers"
BATCH = 500
DRAIN_BATCHES = 20  # one drain's batches, before the writer gets its turn back
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


def stream() -> str:
    """The Redis stream of the usage rows (``SWITCHYARD_USAGE_STREAM``)."""
    return settings.SWITCHYARD_USAGE_STREAM


def _consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _ensure_group(client) -> None:
    import redis

    try:
        client.xgroup_create(stream(), GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def dead_letter_stream() -> str:
    return stream() + ":dead"


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
    consumer, name = consumer or _consumer_name(), stream()
    _ensure_group(client)
    # First, entries a dead (or stuck) writer left pending for too long.
    _, claimed, *_ = client.xautoclaim(name, GROUP, consumer, claim_idle_ms, "0-0", count=BATCH)
    batches = [claimed] if claimed else []
    response = client.xreadgroup(GROUP, consumer, {name: ">"}, count=BATCH, block=block_ms)
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
        client.xack(name, GROUP, *ids)
        client.xdel(name, *ids)
        handled += len(ids)
    return handled


def redis_client(block_ms: int = 0):
    return redis_conn.sync_client(**redis_conn.timeouts(block_ms / 1000))


_redis_sync = None


def drain_once() -> int:
    """Move what the stream holds into the database, a bounded number of batches."""
    global _redis_sync
    if _redis_sync is None:
        _redis_sync = redis_client()
    from django.db import close_old_connections

    close_old_connections()
    try:
        total = 0
        for _ in range(DRAIN_BATCHES):
            handled = drain_redis(_redis_sync)
            total += handled
            if handled < BATCH:
                break
        return total
    finally:
        close_old_connections()
