"""Stored responses are written from the event loop, those that end
together in one transaction; the worker thread takes what the loop cannot
write, and one response that cannot be written costs only itself."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import orjson
import psycopg
import pytest
from django.db import connection

from responses_api.models import StoredItem, StoredResponse
from responses_api.store import continuation
from responses_api.store import loop as store_loop
from responses_api.store import responses as store

pytestmark = pytest.mark.django_db(transaction=True)


def _keep(org, body: bytes | None = None) -> continuation.Keep:
    return continuation.Keep(
        organisation_id=org.id,
        ttl_hours=1,
        body=body or orjson.dumps({"model": "m", "input": [{"role": "user", "content": "hi"}]}),
        instructions=None,
        previous=None,
        references={},
        affinity="",
    )


def _response(n: int) -> dict:
    return {"id": f"resp_group_{n}", "object": "response", "output": [{"id": f"msg_group_{n}"}]}


def _no_worker_thread(monkeypatch) -> list[int]:
    """Counts what goes through the worker thread's insert."""
    used: list[int] = []
    insert = store.responses_insert

    def counted(entries):
        used.append(len(entries))
        insert(entries)

    monkeypatch.setattr(store, "responses_insert", counted)
    return used


def test_concurrent_saves_are_written_from_the_loop_and_each_is_kept(people, monkeypatch):
    acme = people["acme"]
    worker = _no_worker_thread(monkeypatch)
    groups: list[int] = []
    insert = store_loop.insert

    async def counted(entries):
        groups.append(len(entries))
        return await insert(entries)

    monkeypatch.setattr(store_loop, "insert", counted)

    async def main() -> None:
        await asyncio.gather(*(_keep(acme).save(_response(n)) for n in range(40)))

    asyncio.run(main())
    assert StoredResponse.objects.filter(organisation=acme).count() == 40
    assert StoredItem.objects.filter(organisation=acme).count() == 80  # input + output ids
    assert worker == [], "written through the worker thread"
    if connection.vendor == "postgresql":
        # The loop awaits each write: those that end meanwhile share the next.
        assert sum(groups) == 40 and len(groups) < 40, groups
    else:
        assert groups == []  # SQLite: each at once, with no task


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
def test_sqlite_busy_goes_to_the_worker_thread_without_stalling_the_loop(people, monkeypatch):
    """While another writer holds the database, the loop does not wait for
    it: the write goes to the worker thread, and the loop runs on."""
    acme = people["acme"]
    worker = _no_worker_thread(monkeypatch)
    holder = sqlite3.connect(
        connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False
    )
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.3, holder.rollback)
    ticks: list[float] = []

    async def tick() -> None:
        for _ in range(20):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)  # what is measured: how late each tick wakes

    async def main() -> None:
        released.start()
        await asyncio.gather(_keep(acme).save(_response(1)), tick())

    try:
        asyncio.run(main())
    finally:
        released.join()
        holder.close()
    assert StoredResponse.objects.filter(id="resp_group_1").exists()
    assert worker == [1]
    assert max(b - a for a, b in zip(ticks, ticks[1:], strict=False)) < 0.15


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
def test_sqlite_held_briefly_is_waited_for_on_a_timer(people, monkeypatch):
    """A usage batch holds the database for milliseconds: the loop tries
    again on a timer rather than handing the write to the thread."""
    acme = people["acme"]
    worker = _no_worker_thread(monkeypatch)
    holder = sqlite3.connect(
        connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False
    )
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.005, holder.rollback)

    async def main() -> None:
        released.start()
        await _keep(acme).save(_response(1))

    try:
        asyncio.run(main())
    finally:
        released.join()
        holder.close()
    assert StoredResponse.objects.filter(id="resp_group_1").exists()
    assert worker == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the loop's psycopg connection")
def test_a_broken_loop_connection_falls_back_and_reconnects(people, monkeypatch):
    acme = people["acme"]
    worker = _no_worker_thread(monkeypatch)

    async def main() -> None:
        await _keep(acme).save(_response(1))
        loop_connection = store_loop._postgres.connection
        pid = loop_connection.info.backend_pid
        async with await psycopg.AsyncConnection.connect(**_params(), autocommit=True) as killer:
            await killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
            # The backend exits a moment after it is signalled.
            gone = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)"
            async with asyncio.timeout(5):
                while True:
                    exited = await (await killer.execute(gone, (pid,))).fetchone()
                    if exited and exited[0]:
                        break
                    await asyncio.sleep(0.01)
        await _keep(acme).save(_response(2))  # through the worker thread
        await _keep(acme).save(_response(3))  # from the loop again, reconnected
        assert store_loop._postgres.connection is not loop_connection

    asyncio.run(main())
    kept = set(StoredResponse.objects.filter(organisation=acme).values_list("id", flat=True))
    assert kept == {"resp_group_1", "resp_group_2", "resp_group_3"}
    assert worker == [1]


def _params() -> dict:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    return params


def test_one_response_that_cannot_be_written_costs_only_itself(people, caplog):
    acme = people["acme"]

    async def main() -> None:
        broken = _keep(acme, body=b"not json")
        await asyncio.gather(
            *(_keep(acme).save(_response(n)) for n in range(5)),
            broken.save(_response(99)),
        )

    asyncio.run(main())
    kept = set(StoredResponse.objects.filter(organisation=acme).values_list("id", flat=True))
    assert kept == {f"resp_group_{n}" for n in range(5)}
    assert "resp_group_99 could not be stored" in caplog.text
