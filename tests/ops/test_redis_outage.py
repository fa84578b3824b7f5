"""API requests through a Redis outage: a 503 the client may retry, never a
500, each with its usage row (written by the web process itself while the
stream is out of reach), and served again as soon as Redis is back.

The outage is real: the web process reaches its own Redis server through a
TCP proxy that the test cuts and restores (``tests.ops.outages``)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import server_env, start_daphne, wait_for, wait_rows
from tests.ops.outages import PASSWORD, TcpProxy, redis_server

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_request_during_a_redis_outage_is_a_503_to_retry(provision, simulator, tmp_path):
    acme = provision("acme", simulator.url)
    with redis_server(tmp_path) as redis:
        proxy = TcpProxy(("127.0.0.1", redis.port))
        url = f"redis://:{PASSWORD}@127.0.0.1:{proxy.port}/0"
        server = start_daphne(server_env(REDIS_URL=url))
        try:
            statuses: list[int] = []

            def ask() -> httpx.Response:
                answer = httpx.post(
                    server.url + "/v1/responses",
                    headers={"authorization": f"Bearer {acme.key}"},
                    json={"model": "sim-model", "input": "hello"},
                    timeout=30,
                )
                statuses.append(answer.status_code)
                return answer

            assert ask().status_code == 200
            proxy.cut()
            refused = ask()
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert error["code"] == "unavailable" and "retry" in error["message"]
            assert refused.headers["retry-after"] and refused.headers["x-request-id"]
            proxy.restore()
            wait_for(lambda: ask().status_code == 200, timeout=30, interval=0.2)
            rows = wait_rows(len(statuses), organisation=acme.organisation)
            assert sorted(row.status for row in rows) == sorted(statuses)
        finally:
            server.stop()
            proxy.close()
