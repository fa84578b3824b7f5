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
  (``responses_api/usage_sanitise.py``: NUL, lengths, ranges, NaN), so a
  hostile header or a backend's odd count costs no row.
- A row the database still refuses (its organisation was deleted meanwhile,
  an entry that is not JSON) does not hold the others back: its batch is
  written row by row, and it is kept as a dead letter
  (``responses_api/deadletters.py``, ``manage.py usage_deadletters``), or on
  the ``switchyard:usage:dead`` stream if even that table refuses it. A
  database that is down or locked is not such a case: nothing is
  acknowledged, and writers retry with a backoff.

Rows are lost only if Redis loses acknowledged writes: run it with AOF
(``appendonly yes``) where that matters.

Without Redis (the embedded default, one process) rows wait in process memory
for about ``FLUSH_INTERVAL`` seconds before a batch insert, and are written at
interpreter exit (and at SIGTERM, ``responses_api/draining.py``); a crash of
the process loses at most that fraction of a second of rows. The same
sanitising, row-by-row retry and dead letters apply.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction

from responses_api import redis_conn
from responses_api.deadletters import (
    Refusal,
    database_unavailable,
    deadletter_refused_again,
    deadletters_add,
    deadletters_for,
    row_decode,
    row_encode,
)
from responses_api.usage_sanitise import RowSanitiser, json_clean

log = logging.getLogger(__name__)

STREAM = os.environ.get("SWITCHYARD_USAGE_STREAM", "switchyard:usage")
GROUP = "writers"
BATCH = 500
CLAIM_IDLE_MS = 30_000
FLUSH_INTERVAL = 0.2
MAX_BACKOFF = 30.0

# A spreadsheet reads a cell starting with one of these as a formula: a
# user agent, a model name or an error message from a request could then
# run one in whoever opens the export. OWASP's "CSV Injection" rule: prefix
# such a text cell with a quote. Numbers (a negative cost) are left alone.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell that no spreadsheet runs as a formula."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


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


class _Prepare:
    """A submitted row as the values of ``UsageLog``'s columns: other keys
    dropped, every value repaired to fit its column (``usage_sanitise``)."""

    def __init__(self) -> None:
        from responses_api.models import UsageLog, usage_columns

        self.names = frozenset(usage_columns())
        self.sanitise = RowSanitiser(UsageLog)

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        names = self.names
        return self.sanitise({k: v for k, v in row.items() if k in names})


_prepare: _Prepare | None = None


def _prepared(row: dict[str, Any]) -> dict[str, Any]:
    global _prepare
    if _prepare is None:
        _prepare = _Prepare()
    return _prepare(row)


class _Insert:
    """``INSERT … ON CONFLICT (request_id) DO NOTHING RETURNING request_id``
    for a batch of rows, in one statement: the rows it returns are those
    actually inserted, which are the ones the roll-ups count.

    The same values the ORM would store (each field's own conversion for the
    connection), without building a model instance and compiling the SQL per
    row: ``bulk_create`` cost about as much CPU per row as relaying the
    request did. Only a repeated ``request_id`` is skipped; any other
    constraint (a deleted organisation, a negative count) still fails, so the
    row is set aside rather than silently dropped. SQLite's statement goes
    to the DB-API connection: its errors are wrapped as Django's (as the
    cursor would have), so that the writer can tell the row's from the
    database's.
    """

    # SQLite takes at most 32,766 parameters per statement.
    MAX_PARAMS = 30_000
    # PostgreSQL: one array per column (``unnest``), so the statement's text
    # is the same for any number of rows. psycopg parses a statement with
    # more than 50 parameters again on every execution (its cache stops
    # there): rows as ``VALUES`` lists, 16 to a statement, spent half the
    # writer's CPU in that parse. The rows per statement bound how long one
    # statement's quoting holds the interpreter (a web process's writer
    # thread shares it with the event loop).
    ROWS_PER_STATEMENT = {"postgresql": 128}

    def __init__(self) -> None:
        from responses_api.models import UsageLog

        self.fields = [f for f in UsageLog._meta.concrete_fields if f is not UsageLog._meta.pk]
        self.table = UsageLog._meta.db_table
        # Per database connection (one per writer thread): the connection,
        # kept so that its id is not reused, and its columns.
        self._columns: dict[int, tuple[Any, list[_Column]]] = {}
        self._sql: dict[tuple[str, int], str] = {}

    def sql(self, connection, count: int) -> str:
        """The statement for ``count`` rows, with SQLite's own ``?`` marks
        there: its rows go to the DB-API connection itself, since Django's
        SQLite cursor rewrites every ``%s`` with a regular expression, on
        every execution — a seventh of the writer's instructions, in
        statements of thousands of parameters."""
        arrays = connection.vendor == "postgresql"
        key = (connection.vendor, 0 if arrays else count)
        sql = self._sql.get(key)
        if sql is None:
            quote = connection.ops.quote_name
            columns = ", ".join(quote(f.column) for f in self.fields)
            if arrays:
                casts = ", ".join(f"%s::{f.db_type(connection)}[]" for f in self.fields)
                rows = f"SELECT * FROM unnest({casts})"
            else:
                mark = "?" if connection.vendor == "sqlite" else "%s"
                marks = "(" + ", ".join([mark] * len(self.fields)) + ")"
                rows = "VALUES " + ", ".join([marks] * count)
            sql = self._sql[key] = (
                f"INSERT INTO {quote(self.table)} ({columns}) {rows} "
                f"ON CONFLICT ({quote('request_id')}) DO NOTHING RETURNING {quote('request_id')}"
            )
        return sql

    def columns(self, connection) -> list[_Column]:
        """Per column: the row's key, the field's default, its conversion."""
        known = self._columns.get(id(connection))
        if known is None:
            known = (
                connection,
                [(f.attname, f.get_default, _converter(f, connection)) for f in self.fields],
            )
            self._columns[id(connection)] = known
        return known[1]

    def __call__(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Insert the rows; returns those inserted (prepared), each once."""
        # The thread's connection itself, not ``django.db.connection``: that
        # proxy looks the connection up again on every attribute read, and
        # Django's conversions read several per value.
        connection = connections[DEFAULT_DB_ALIAS]
        columns = self.columns(connection)
        prepared = [_prepared(row) for row in rows]
        inserted: set[uuid.UUID] = set()
        arrays = connection.vendor == "postgresql"
        with connection.cursor() as cursor:
            raw = connection.connection if connection.vendor == "sqlite" else None
            most = min(
                self.MAX_PARAMS // len(columns),
                self.ROWS_PER_STATEMENT.get(connection.vendor, self.MAX_PARAMS),
            )
            # An array statement's text is the same at any size: plain slices.
            chunks = (
                [(start, most) for start in range(0, len(prepared), most)]
                if arrays
                else _chunks(len(prepared), most)
            )
            for start, size in chunks:
                chunk = prepared[start : start + size]
                params: list[Any]
                if arrays:
                    params = [
                        [convert(data[name] if name in data else default()) for data in chunk]
                        for name, default, convert in columns
                    ]
                else:
                    params = [
                        convert(data[name] if name in data else default())
                        for data in chunk
                        for name, default, convert in columns
                    ]
                sql = self.sql(connection, len(chunk))
                if raw is not None:  # in the same transaction: the same connection
                    with connection.wrap_database_errors:
                        returned = raw.execute(sql, params).fetchall()
                else:
                    cursor.execute(sql, params)
                    returned = cursor.fetchall()
                inserted.update(_as_uuid(value) for (value,) in returned)
        fresh = []
        for data in prepared:
            request_id = _as_uuid(data["request_id"])
            if request_id in inserted:
                inserted.discard(request_id)
                fresh.append(data)
        return fresh


def _chunks(count: int, most: int) -> list[tuple[int, int]]:
    """(start, size) of the statements that insert ``count`` rows: sizes are
    powers of two, at most ``most``. A statement's text depends on its size,
    and SQLite keeps each distinct statement compiled in the connection's
    cache (128 of them): batches of every size from 1 to 500 filled it with
    programs of thousands of parameters each, and the embedded process grew
    by tens of MB. Powers of two make at most a dozen statements."""
    largest = 1 << (max(1, most).bit_length() - 1)
    out = []
    start = 0
    while start < count:
        size = largest
        while size > count - start:
            size >>= 1
        out.append((start, size))
        start += size
    return out


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


_Column = tuple[str, Callable[[], Any], Callable[[Any], Any]]


def _converter(field: models.Field, connection) -> Callable[[Any], Any]:
    """``field.get_db_prep_save`` for ``connection``, short-cut for the values
    it would pass through unchanged.

    Django's conversion walks three or four methods per value; for a usage
    row that was half the writer's time. A plain text, flag or float field
    (exactly those classes, not subclasses that may convert) stores its own
    Python type as it is, and an integer field only asks the database
    backend to adapt it. Anything else (UUIDs,
    keys, dates, JSON, decimals, IP addresses, a value of another type)
    takes Django's full path.
    """
    slow = functools.partial(field.get_db_prep_save, connection=connection)
    kind = type(field)
    plain = _STORED_AS_IS.get(kind)
    if plain is not None:

        def convert(value: Any) -> Any:
            return value if value is None or type(value) is plain else slow(value)

        return convert
    if kind in (models.PositiveIntegerField, models.PositiveSmallIntegerField):
        adapt = connection.ops.adapt_integerfield_value
        internal = field.get_internal_type()

        def convert_int(value: Any) -> Any:
            if value is None:
                return None
            return adapt(value, internal) if type(value) is int else slow(value)

        return convert_int
    return slow


_STORED_AS_IS = {
    models.CharField: str,
    models.TextField: str,
    models.BooleanField: bool,
    models.FloatField: float,
}

_insert: _Insert | None = None


def insert_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Insert rows not yet in the log; returns those inserted."""
    global _insert
    if _insert is None:
        _insert = _Insert()
    return _insert(rows)


def _commit(rows: list[dict[str, Any]]) -> None:
    from responses_api.rollups import rollups_add

    with transaction.atomic():
        inserted = insert_rows(rows)
        rollups_add(inserted)
        _touch_keys(inserted)


def _refusals(rows: list[dict[str, Any]]) -> list[Refusal]:
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
    refused = _refusals(rows)
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


@dataclass(frozen=True)
class Replayed:
    written: int  # now in the usage log (inserted, or there already)
    refused: int  # still refused: kept, with the new error
    undecodable: int  # not a row at all (an entry of the stream that was not JSON)


def deadletters_replay(*, ids: Sequence[int] = ()) -> Replayed:
    """Write dead letters (all, or those of ``ids``) into the usage log,
    repaired by today's rules, and delete those written. Idempotent: a row
    already in the log counts as written. A key or backend deleted since
    the request is dropped from the row, as its deletion would have done
    (``SET_NULL``) had the row been written then. A database that is down
    raises; what was replayed until then stays replayed."""
    from accounts.models import ApiKey
    from responses_api.models import Backend

    letters = deadletters_for()
    if ids:
        letters = letters.filter(pk__in=ids)
    written = refused = undecodable = 0
    for letter in list(letters):
        row = row_decode(letter.row)
        if row is None:
            undecodable += 1
            continue
        data = _prepared(row)
        for name, model in (("api_key_id", ApiKey), ("backend_id", Backend)):
            if data.get(name) is not None and not model.objects.filter(pk=data[name]).exists():
                data[name] = None
        refusals = _refusals([data])
        if refusals:
            deadletter_refused_again(letter=letter, refusal=refusals[0])
            refused += 1
        else:
            letter.delete()
            written += 1
    return Replayed(written, refused, undecodable)


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


def deadletters_adopt(client) -> tuple[int, int]:
    """Move the entries of the ``switchyard:usage:dead`` stream (where
    earlier versions parked refused rows, and where rows go that even the
    dead letters' table refused) into that table, so that they are listed
    and replayed with the others. Returns (moved, left in the stream)."""
    entries = client.xrange(dead_letter_stream())
    moved = left = 0
    for entry_id, fields in entries:
        try:
            parked = orjson.loads(fields[b"r"])
        except (orjson.JSONDecodeError, KeyError):
            parked = {"undecodable": repr(fields)[:2000]}
        if isinstance(parked, dict) and isinstance(parked.get("row"), dict):
            row, reason = parked["row"], str(parked.get("error") or "refused")
        elif isinstance(parked, dict) and "fields" not in parked:
            row, reason = parked, "refused"
        else:  # an entry that was never a row
            row, reason = {"undecodable": str(parked)[:2000]}, "undecodable"
        refusal = Refusal(row, reason, "moved from the Redis stream " + dead_letter_stream())
        if deadletters_add(refused=[refusal]):
            left += 1
        else:
            client.xdel(dead_letter_stream(), entry_id)
            moved += 1
    return moved, left


def redis_client():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


class UsageSink:
    """Per-process entry point: ``sink.submit(row)`` (see there)."""

    def __init__(self) -> None:
        self.pending: list[dict[str, Any]] = []
        atexit.register(self.flush_at_exit)
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    def _ensure_task(self) -> None:
        if settings.REDIS_URL and not settings.SWITCHYARD_USAGE_DRAIN_IN_WEB:
            return  # Celery's drain_usage writes the rows
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            self._loop = loop
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run(), name="switchyard-usage-writer")

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
        await redis_conn.run_batch([("XADD", STREAM, "*", "r", encode_row(row)), *then], scripts)
        self._wake_writer()

    def _wake_writer(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        backoff = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=5.0)
            self._wake.clear()
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
        rows, self.pending = self.pending, []
        if rows:
            try:
                write_rows(rows)
            except Exception:
                log.exception("%d usage rows could not be written at exit", len(rows))

    async def flush(self) -> int:
        if settings.REDIS_URL:
            return await sync_to_async(_drain_once, thread_sensitive=False)()
        rows, self.pending = self.pending, []
        if not rows:
            return 0
        try:
            # Refused rows become dead letters; only an unavailable
            # database raises here.
            await sync_to_async(write_rows)(rows)
        except Exception:
            self.pending[:0] = rows
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
