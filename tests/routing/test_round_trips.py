"""Redis round trips per request, in production mode: the routing claim,
then the usage row with everything the request gives back (its backend
slot, its rate-limit leases and token correction) in one pipeline. Counted
in-process at the connection's ``send_packed_command``: one call is one
round trip, a pipeline's commands going out together."""

from __future__ import annotations

import re
from typing import Any

import pytest

from responses_api.catalogue import catalog
from responses_api.runtime import redis_conn
from tests.api.test_consumer import Client, body, run, scope
from tests.routing.conftest import needs_redis

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), needs_redis]

_COMMAND = re.compile(rb"\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n")


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    catalog.forget()
    yield
    catalog.forget()


@pytest.fixture
def leases_left():
    """The leases this process holds that it did not hold when the test
    began: another test's request left unended on purpose (a frozen
    background worker's) is not this one's."""
    before = set(redis_conn.leases.held)
    return lambda: set(redis_conn.leases.held) - before


@pytest.fixture
def round_trips(monkeypatch) -> list[list[str]]:
    """The commands of each round trip the process's Redis client makes."""
    from redis.asyncio.connection import AbstractConnection

    trips: list[list[str]] = []
    send = AbstractConnection.send_packed_command

    async def counted(self, command: Any, check_health: bool = True) -> None:
        packed = command if isinstance(command, bytes) else b"".join(bytes(c) for c in command)
        trips.append([name.decode().upper() for name in _COMMAND.findall(packed)])
        await send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return trips


def requests(key: str, trips: list[list[str]], *, stream: bool) -> list[list[str]]:
    """The round trips of a request, after one that connected and loaded
    the scripts."""

    async def main() -> list[list[str]]:
        for _ in range(2):
            trips.clear()
            client = Client(scope(key))
            await client.send_body(body("hello [[tokens:5]]", stream=stream))
            await client.read_all()
            assert client.status() == 200
            await client.app.wait(5)
        return list(trips)

    return run(main())


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_request_without_limits_claims_a_slot_then_hands_its_row_over_with_it(
    provision, simulator, round_trips, stream
):
    tenant = provision("acme", simulator.url)
    assert requests(tenant.key, round_trips, stream=stream) == [["EVALSHA"], ["XADD", "ZREM"]]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_an_unlimited_backend_nothing_compares_holds_no_slot(
    provision, simulator, round_trips, leases_left, stream
):
    from responses_api.catalogue.services.backends import backend_ensure

    tenant = provision("acme", simulator.url)
    backend_ensure(
        organisation=tenant.organisation, name="sim", base_url=simulator.url, max_concurrency=0
    )
    assert requests(tenant.key, round_trips, stream=stream) == [["XADD"]]
    assert not leases_left()


def test_rate_limits_are_settled_in_the_rows_round_trip(
    provision, simulator, round_trips, leases_left
):
    tenant = provision("acme", simulator.url, rpm=1000, tpm=1_000_000, concurrency=10)
    admit, claim, row = requests(tenant.key, round_trips, stream=False)
    assert admit == claim == ["EVALSHA"]
    # The row first: a connection lost after it keeps leases, which expire.
    assert row[0] == "XADD"
    assert sorted(row[1:]) == sorted(["ZREM", "ZREM", "INCRBY", "EXPIRE"])
    assert not leases_left()


def test_batches_asked_for_together_share_one_round_trip(round_trips):
    """What requests ask for in the same turn of the loop goes out in one
    pipeline; each gets its own results, and its own error only."""
    import asyncio

    import redis.exceptions

    async def main():
        await redis_conn.async_client().delete("sy:test:n", "sy:test:text")
        await redis_conn.run_batch([("SET", "sy:test:text", "x")])
        round_trips.clear()
        counts = [("INCRBY", "sy:test:n", 1)]
        results = await asyncio.gather(
            redis_conn.run_batch(counts),
            redis_conn.run_batch([("INCRBY", "sy:test:text", 1)]),
            redis_conn.run_batch([*counts, ("GET", "sy:test:n")]),
            return_exceptions=True,
        )
        trips = list(round_trips)
        # A caller cancelled before its turn sends nothing.
        gone = asyncio.ensure_future(redis_conn.run_batch(counts))
        await asyncio.sleep(0)
        gone.cancel()
        kept = await redis_conn.run_batch([("GET", "sy:test:n")])
        await redis_conn.async_client().delete("sy:test:n", "sy:test:text")
        return results, trips, kept

    results, trips, kept = run(main())
    assert trips[0] == ["INCRBY", "INCRBY", "INCRBY", "GET"]
    assert len(trips) == 1
    assert results[0] == ([], [1])
    assert isinstance(results[1], redis.exceptions.ResponseError)
    assert results[2] == ([], [2, b"2"])
    assert kept == ([], [b"2"])
