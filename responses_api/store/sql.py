"""The SQL that inserts stored responses, per connection vendor.

The ORM's ``save`` and ``bulk_create`` cost several times the database's own
work on the path of every stored response, so the inserts are written out
here once per vendor: on PostgreSQL one statement keeps a response and its
item ids, elsewhere two. Both the request path's writes
(``store.responses.responses_insert``) and the store's own thread
(``store.loop``) run them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from responses_api.models import StoredItem, StoredResponse

# A response's row (the values of ``_RESPONSE_FIELDS``) and the rows of its
# item ids (organisation, response, item id).
Entry = tuple[tuple[Any, ...], list[tuple[int, str, str]]]


def row_values(connection: Any, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``row``'s values as ``connection`` takes them (its datetimes)."""
    adapt = connection.ops.adapt_datetimefield_value
    return (*row[:8], adapt(row[8]), adapt(row[9]))


def postgres_params(connection: Any, entry: Entry) -> tuple[Any, ...]:
    """The parameters of PostgreSQL's one statement for ``entry``."""
    row, items = entry
    return (*row_values(connection, row), row[1], [item_id for *_, item_id in items])


def sqlite_write(raw: Any, connection: Any, entries: Sequence[Entry]) -> None:
    """On the DB-API connection ``raw``, in the transaction its caller began:
    the inserts, then the commit, or the rollback and the error."""
    sql = statements(connection)
    try:
        for row, items in entries:
            raw.execute(sql[0], row_values(connection, row))
            if items:
                raw.executemany(sql[1], items)
    except BaseException:
        raw.execute("ROLLBACK")
        raise
    raw.execute("COMMIT")


_SQL: dict[str, tuple[str, str, str]] = {}


def statements(connection: Any) -> tuple[str, str, str]:
    """The inserts of :func:`responses_insert`, for ``connection``'s vendor:
    a response, its item ids, and (PostgreSQL) both in one statement."""
    sql = _SQL.get(connection.vendor)
    if sql is None:
        sql = _SQL[connection.vendor] = _statements(connection)
    return sql


def _statements(connection: Any) -> tuple[str, str, str]:
    quote = connection.ops.quote_name

    def columns(model: Any, fields: Sequence[str]) -> str:
        return ", ".join(quote(model._meta.get_field(f).column) for f in fields)

    responses, items = (quote(m._meta.db_table) for m in (StoredResponse, StoredItem))
    # SQLite's statements run on the DB-API connection (``responses_insert``).
    mark = "?" if connection.vendor == "sqlite" else "%s"
    marks = ", ".join([mark] * len(_RESPONSE_FIELDS))
    response = f"INSERT INTO {responses} ({columns(StoredResponse, _RESPONSE_FIELDS)}) "
    item_columns = columns(StoredItem, ("organisation", "response", "item_id"))
    both = (
        f"WITH kept AS ({response}VALUES ({marks}) RETURNING {quote('id')}) "
        f"INSERT INTO {items} ({item_columns}) "
        f"SELECT %s, kept.{quote('id')}, unnest(%s::varchar[]) FROM kept"
    )
    return (
        f"{response}VALUES ({marks})",
        f"INSERT INTO {items} ({item_columns}) VALUES ({mark}, {mark}, {mark})",
        both,
    )


_RESPONSE_FIELDS = (
    "id",
    "organisation",
    "previous_response_id",
    "root_id",
    "depth",
    "affinity",
    "data",
    "size",
    "created_at",
    "expires_at",
)
