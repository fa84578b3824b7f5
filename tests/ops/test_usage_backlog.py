"""While neither Redis nor the database takes usage rows, a web process
holds them in memory, up to ``SWITCHYARD_USAGE_PENDING_MAX``. Past it, new
requests are refused with a 503 before they are authenticated (so they make
no row, and none is dropped); once a store is back, every held row is
written and requests are served again.

The outages are real: the web process reaches its Redis and PostgreSQL
through TCP proxies that the test cuts and restores."""

from __future__ import annotations

import httpx
import pytest
from django.conf import settings

from tests.conftest import server_env, start_daphne, usage_rows, wait_for, wait_rows
from tests.ops.outages import PASSWORD, TcpProxy, redis_server

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

PENDING_MAX = 3


def test_past_the_pending_rows_bound_requests_are_refused_and_no_row_is_lost(
    provision, simulator, tmp_path
):
    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("postgresql"):
        pytest.skip("a database outage needs PostgreSQL over TCP (DATABASE_URL=postgres://...)")
    acme = provision("acme", simulator.url)
    database = TcpProxy((db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)))
    auth = db.get("USER") or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    with redis_server(tmp_path) as redis:
        cache = TcpProxy(("127.0.0.1", redis.port))
        env = server_env(
            REDIS_URL=f"redis://:{PASSWORD}@127.0.0.1:{cache.port}/0",
            SWITCHYARD_USAGE_PENDING_MAX=str(PENDING_MAX),
            # The key and the catalogue stay known while the database is away.
            SWITCHYARD_AUTH_CACHE_SECONDS="600",
            SWITCHYARD_CATALOG_CACHE_SECONDS="600",
        )
        env["DATABASE_URL"] = f"postgres://{auth}@127.0.0.1:{database.port}/{db['NAME']}"
        server = start_daphne(env)
        answered: list[httpx.Response] = []

        def ask() -> httpx.Response:
            answer = httpx.post(
                server.url + "/v1/responses",
                headers={"authorization": f"Bearer {acme.key}"},
                json={"model": "sim-model", "input": "hello"},
                timeout=30,
            )
            answered.append(answer)
            return answer

        try:
            assert ask().status_code == 200
            wait_rows(1, organisation=acme.organisation)
            database.cut()
            cache.cut()
            # Each is an outage's 503, its row held in memory.
            held = [ask() for _ in range(PENDING_MAX)]
            assert [answer.status_code for answer in held] == [503] * PENDING_MAX
            assert all(answer.json()["error"]["code"] == "unavailable" for answer in held)

            full = ask()
            assert full.status_code == 503, full.text
            error = full.json()["error"]
            assert error["code"] == "unavailable"
            assert error["message"].startswith("Usage cannot be recorded")
            assert full.headers["retry-after"] and full.headers["x-request-id"]

            database.restore()
            rows = wait_rows(1 + PENDING_MAX, timeout=60, organisation=acme.organisation)
            ids = {str(row.request_id) for row in rows}
            assert ids == {answer.headers["x-request-id"] for answer in [answered[0], *held]}
            # The refused request made no row, and no row was written twice.
            assert full.headers["x-request-id"] not in ids and len(rows) == len(ids)

            cache.restore()
            served = wait_for(lambda: (answer := ask()).status_code == 200 and answer, timeout=30)
            # A row whose write failed as the database went is claimed again
            # once it has been idle 30 s (CLAIM_IDLE_MS).
            wait_for(
                lambda: len(usage_rows(organisation=acme.organisation)) == len(answered) - 1,
                timeout=90,
            )
            assert str(usage_rows(request_id=served.headers["x-request-id"])[0].request_id)
        finally:
            server.stop()
            cache.close()
            database.close()
