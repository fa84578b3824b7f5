"""Stored responses written from the event loop's own thread.

A stored response is written before its answer goes out (docs/api/stored-responses.md). From
a worker thread, that write cost more than the write itself: the hop there
and back, each side waiting for the other to let go of the interpreter,
and the worker's cold caches — at concurrency 1, several times the write's
own CPU (bench/README.md, 32.). So the write is done where the answer waits
for it:

- **SQLite** (the embedded default): on a connection of the loop's thread
  that never waits. Its transaction begins with a busy timeout of zero, so
  when another writer (the usage writer, the console) holds the database,
  the loop tries again on a timer (``BUSY_PAUSES``), then gives the write to
  the worker thread, instead of stalling; and it
  never checkpoints the write-ahead log (``wal_autocheckpoint=0``), which
  the other connections' commits do, so the loop never waits for a sync.
- **PostgreSQL**: on an asynchronous psycopg connection of the loop: the
  loop awaits the server's answer like any other socket.

:func:`insert` answers False when it cannot write here (another vendor, an
in-memory database, SQLite busy, PostgreSQL unreachable), and the caller
writes through the worker thread (``store.responses_insert``) as before.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from django.db import connections, router

from responses_api.models import StoredResponse
from responses_api.store import responses as store

log = logging.getLogger(__name__)


class _Wrapper(threading.local):
    """This thread's own Django connection object, never connected: its
    settings (the same dictionary as Django's, so the test runner's
    database name shows), its vendor and its SQL operations. From the event
    loop, ``connections[alias]`` would build one for every request, since
    Django keeps connections per asynchronous context."""

    wrapper: Any = None


_wrapper = _Wrapper()


def _django() -> Any:
    if _wrapper.wrapper is None:
        _wrapper.wrapper = connections.create_connection(router.db_for_write(StoredResponse))
    return _wrapper.wrapper


class _Sqlite(threading.local):
    """One connection per thread (SQLite's connections stay on the thread
    that opened them), reopened when the database's name changes (the test
    runner's database)."""

    name: str | None = None
    connection: sqlite3.Connection | None = None

    def get(self, django: Any) -> sqlite3.Connection | None:
        name = django.settings_dict["NAME"]
        if django.creation.is_in_memory_db(name):
            return None  # another connection would be another database
        if self.connection is None or self.name != name:
            if self.connection is not None:
                self.connection.close()
            connection = sqlite3.connect(
                name, timeout=0, isolation_level=None, check_same_thread=True
            )
            # The write-ahead log is the database's own setting (settings.py);
            # these are the connection's.
            connection.executescript(
                "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint=0;"
            )
            self.connection, self.name = connection, name
        return self.connection

    def insert(self, django: Any, entries: Sequence[store.Entry]) -> bool:
        connection = self.get(django)
        if connection is None:
            return False
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return False  # another writer holds the database: not worth a wait here
        store.sqlite_write(connection, django, entries)
        return True


class _Postgres:
    """One asynchronous connection for the loop it was opened on."""

    def __init__(self) -> None:
        self.connection: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failed_at = 0.0

    async def get(self, django: Any) -> Any:
        loop = asyncio.get_running_loop()
        if self.connection is not None and (self.loop is not loop or self.connection.closed):
            self.connection.pgconn.finish()  # its loop is gone: close it without one
            self.connection = None
        if self.connection is None:
            if loop.time() - self.failed_at < 5.0:
                return None  # the server was unreachable a moment ago
            import psycopg

            params = django.get_connection_params()
            params.pop("cursor_factory", None)
            try:
                self.connection = await psycopg.AsyncConnection.connect(**params, autocommit=True)
            except psycopg.Error:
                self.failed_at = loop.time()
                log.warning("stored responses: no connection from the event loop", exc_info=True)
                return None
            self.loop = loop
        return self.connection

    async def insert(self, django: Any, entries: Sequence[store.Entry]) -> bool:
        import psycopg

        connection = await self.get(django)
        if connection is None:
            return False
        sql = store.statements(django)[2]
        try:
            if len(entries) == 1:  # one statement: atomic by itself
                await connection.execute(sql, store.postgres_params(django, entries[0]))
                return True
            async with connection.transaction():
                for entry in entries:
                    await connection.execute(sql, store.postgres_params(django, entry))
            return True
        except psycopg.OperationalError:
            # The connection broke (the server restarted, the network):
            # these go through the worker thread, the next opens another.
            log.warning("stored responses: the event loop's connection failed", exc_info=True)
            await connection.close()
            self.connection = None
            return False


_sqlite = _Sqlite()
_postgres = _Postgres()


def close() -> None:
    """Close this thread's SQLite connection and the loop's PostgreSQL one,
    without a loop (a test database is dropped only once nothing holds it)."""
    if _sqlite.connection is not None:
        _sqlite.connection.close()
        _sqlite.connection = _sqlite.name = None
    if _postgres.connection is not None:
        _postgres.connection.pgconn.finish()
        _postgres.connection = None


def insert_now(entries: Sequence[store.Entry]) -> bool:
    """SQLite: write ``entries`` at once on this thread, or answer False
    without waiting."""
    django = _django()
    return django.vendor == "sqlite" and _sqlite.insert(django, entries)


# Pauses between the loop's attempts while SQLite is held by another
# writer, whose transactions (a batch of usage rows) last milliseconds: the
# loop waits on a timer, and only then hands the write to the thread.
BUSY_PAUSES = (0.001, 0.002, 0.004, 0.008, 0.016)


async def insert(entries: Sequence[store.Entry]) -> bool:
    """Write ``entries`` in one transaction from the loop, or answer False
    (write them through the worker thread instead)."""
    django = _django()
    if django.vendor == "sqlite":
        for pause in (0.0, *BUSY_PAUSES):
            if pause:
                await asyncio.sleep(pause)
            if _sqlite.insert(django, entries):
                return True
        return False
    if django.vendor == "postgresql":
        return await _postgres.insert(django, entries)
    return False
