"""Usage rows into the database: each row repaired to fit its columns,
then inserted in batches by one statement text per database
(``usage.write_rows`` runs them in its transaction)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models

from responses_api.usage.sanitise import RowSanitiser


class _Prepare:
    """A submitted row as the values of ``UsageLog``'s columns: other keys
    dropped, every value repaired to fit its column (``usage_sanitise``)."""

    def __init__(self) -> None:
        from responses_api.models import UsageLog
        from responses_api.usage.columns import usage_columns

        self.names = frozenset(usage_columns())
        self.sanitise = RowSanitiser(UsageLog)

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        names = self.names
        return self.sanitise({k: v for k, v in row.items() if k in names})


_prepare: _Prepare | None = None


def prepared_row(row: dict[str, Any]) -> dict[str, Any]:
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
        prepared = [prepared_row(row) for row in rows]
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
