"""The event log of background responses (``store.events``) read from any
point, in the environment's mode (this process's memory, or Redis streams
with ``REDIS_URL``): a point before the first event reads from the first,
one past the last reads nothing, and no number wraps round the log or
makes Redis refuse the read, whoever the caller."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from django.conf import settings

from responses_api.runtime import redis_conn
from responses_api.store import events

ORGANISATION = 424242


async def _closing(work):
    try:
        return await work
    finally:
        client = redis_conn._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


@pytest.fixture
def log_id():
    response_id = f"resp_{uuid.uuid4().hex}"
    yield response_id
    if not settings.REDIS_URL:
        events.forget_all()
        return
    import redis

    with redis.Redis.from_url(settings.REDIS_URL) as conn:
        key = events.state_key(ORGANISATION, response_id)
        conn.delete(key, f"{key}:events")


FAR = (2**63, 2**64 - 3, 2**64 - 2, 2**64, 10**30)


def test_a_read_from_any_point_never_wraps_or_fails(log_id):
    everything = [(number, b"event %d" % number) for number in range(4)]

    async def reads():
        await events.append(ORGANISATION, log_id, 0, [event for _, event in everything[:3]])
        # An open log: nothing past its end, whatever the point.
        for after in (2, *FAR):
            read = await events.read(ORGANISATION, log_id, after, wait=0.05)
            assert (read.events, read.ended) == ([], False), after
        await events.append(ORGANISATION, log_id, 3, [everything[3][1]], end=True)
        found = {}
        for after in (-1, -2, -3, -99999999999999999999, -(2**64), 0, 2, 3, 4, *FAR):
            found[after] = await events.read(ORGANISATION, log_id, after, wait=0.05)
        return found

    found = asyncio.run(_closing(reads()))
    for after, read in found.items():
        assert read.ended, after
        if after < 0:
            assert read.events == everything, after
        else:
            assert read.events == everything[after + 1 :], after


@pytest.mark.skipif(bool(os.environ.get("REDIS_URL")), reason="the memory log's waiters")
def test_a_reader_that_stopped_waiting_leaves_no_waiter(log_id):
    """A read that timed out on an open log, on a loop since closed (a web
    process's request ended), is not woken by the next event: the writer
    goes on, and the log holds no waiter per read."""

    async def reader():
        await events.append(ORGANISATION, log_id, 0, [b"first"])
        for _ in range(3):
            read = await events.read(ORGANISATION, log_id, 0, wait=0.01)
            assert read.events == []

    asyncio.run(reader())
    asyncio.run(events.append(ORGANISATION, log_id, 1, [b"second"]))
    assert events._logs[(ORGANISATION, log_id)].waiters == []
