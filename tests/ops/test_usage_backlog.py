"""While no store takes usage rows (Redis and the database both out of
reach, or the database alone without Redis), a web process holds them in
memory, up to ``SWITCHYARD_USAGE_PENDING_MAX``. Past it, new requests are
refused with a 503 before they are authenticated (so they make no row, and
none is dropped); once a store is back, every held row is written and
requests are served again.

The outages are real: the web process reaches PostgreSQL (and Redis)
through TCP proxies that the test cuts and restores."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from django.conf import settings

from tests.conftest import server_env, start_daphne, usage_rows, wait_for, wait_rows
from tests.ops.outages import PASSWORD, TcpProxy, redis_server

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

PENDING_MAX = 3


@contextmanager
def database_proxy() -> Iterator[tuple[TcpProxy, str]]:
    """A proxy to the test database, and the ``DATABASE_URL`` through it."""
    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("postgresql"):
        pytest.skip("a database outage needs PostgreSQL over TCP (DATABASE_URL=postgres://...)")
    proxy = TcpProxy((db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)))
    auth = db.get("USER") or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    try:
        yield proxy, f"postgres://{auth}@127.0.0.1:{proxy.port}/{db['NAME']}"
    finally:
        proxy.close()


class Server:
    """A web process whose key and catalogue stay known while the database
    is away, and every answer it gave."""

    def __init__(self, key: str, database_url: str, **env: str) -> None:
        env = server_env(
            SWITCHYARD_USAGE_PENDING_MAX=str(PENDING_MAX),
            SWITCHYARD_AUTH_CACHE_SECONDS="600",
            SWITCHYARD_CATALOG_CACHE_SECONDS="600",
            **env,
        )
        env["DATABASE_URL"] = database_url
        self.process = start_daphne(env)
        self.key = key
        self.answered: list[httpx.Response] = []

    def ask(self) -> httpx.Response:
        answer = httpx.post(
            self.process.url + "/v1/responses",
            headers={"authorization": f"Bearer {self.key}"},
            json={"model": "sim-model", "input": "hello"},
            timeout=30,
        )
        self.answered.append(answer)
        return answer


def _refused_past_the_bound(server: Server, full: httpx.Response | None = None) -> httpx.Response:
    """The next answer (or ``full``, already had): the refusal of a process
    holding as many rows as it may."""
    full = full if full is not None else server.ask()
    assert full.status_code == 503, full.text
    error = full.json()["error"]
    assert error["code"] == "unavailable"
    assert error["message"].startswith("Usage cannot be recorded")
    assert full.headers["retry-after"] and full.headers["x-request-id"]
    return full


def _rows_of(answers: list[httpx.Response], organisation) -> set[str]:
    """Wait for the rows of ``answers``; their request ids, each written once."""
    rows = wait_rows(len(answers), timeout=60, organisation=organisation)
    ids = [str(row.request_id) for row in rows]
    assert len(ids) == len(set(ids))
    assert set(ids) == {answer.headers["x-request-id"] for answer in answers}
    return set(ids)


def test_with_redis_and_the_database_down_rows_are_held_up_to_the_bound(
    provision, simulator, tmp_path
):
    acme = provision("acme", simulator.url)
    with database_proxy() as (database, database_url), redis_server(tmp_path) as redis:
        cache = TcpProxy(("127.0.0.1", redis.port))
        url = f"redis://:{PASSWORD}@127.0.0.1:{cache.port}/0"
        server = Server(acme.key, database_url, REDIS_URL=url)
        try:
            assert server.ask().status_code == 200
            wait_rows(1, organisation=acme.organisation)
            database.cut()
            cache.cut()
            # Each is an outage's 503, its row held in memory.
            held = [server.ask() for _ in range(PENDING_MAX)]
            assert [answer.status_code for answer in held] == [503] * PENDING_MAX
            assert all(answer.json()["error"]["code"] == "unavailable" for answer in held)
            full = _refused_past_the_bound(server)

            database.restore()
            ids = _rows_of([server.answered[0], *held], acme.organisation)
            assert full.headers["x-request-id"] not in ids  # refused: no row

            cache.restore()
            served = wait_for(lambda: (a := server.ask()).status_code == 200 and a, timeout=30)
            # A row whose write failed as the database went is claimed again
            # once it has been idle 30 s (CLAIM_IDLE_MS).
            wait_for(lambda: usage_rows(request_id=served.headers["x-request-id"]), timeout=90)
            assert len(usage_rows(organisation=acme.organisation)) == len(server.answered) - 1
        finally:
            server.process.stop()
            cache.close()


def test_embedded_with_the_database_down_requests_are_served_up_to_the_bound(provision, simulator):
    """Without Redis, requests are served while the database is away, their
    rows held in memory: up to the bound, then refused."""
    acme = provision("acme", simulator.url)
    with database_proxy() as (database, database_url):
        server = Server(acme.key, database_url, REDIS_URL="")
        try:
            assert server.ask().status_code == 200
            wait_rows(1, organisation=acme.organisation)
            database.cut()
            served = []
            while len(served) < PENDING_MAX and (answer := server.ask()).status_code == 200:
                served.append(answer)
            # The first row's commit may have been seen here before its
            # writer had the answer: the cut loses that answer, and the row
            # is held again (its insert is idempotent), taking one place.
            assert len(served) >= PENDING_MAX - 1, [a.text for a in server.answered]
            full = _refused_past_the_bound(server, answer if len(served) < PENDING_MAX else None)

            database.restore()
            ids = _rows_of([server.answered[0], *served], acme.organisation)
            assert full.headers["x-request-id"] not in ids
            assert wait_for(lambda: server.ask().status_code == 200, timeout=30)
            wait_rows(len(ids) + 1, timeout=30, organisation=acme.organisation)
        finally:
            server.process.stop()
