"""API requests while Redis accepts connections and never answers (a host
whose packets vanish, a server stuck on a disk): each is a 503 to retry
within a few seconds, as for a refused connection, never a request held for
ever, and each keeps its usage row, which the web process writes itself
since the stream does not take it."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import server_env, start_daphne, wait_rows
from tests.ops.outages import silent_server

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# Redis' read timeout for the test's server (the default is 2 s): a
# request makes at most a few Redis calls in a row before it answers.
TIMEOUT = 1.0
BOUND = 6 * TIMEOUT


@pytest.mark.parametrize("limited", [False, True], ids=["unlimited", "rate-limited"])
def test_a_request_while_redis_never_answers_is_a_prompt_503_with_its_row(
    provision, simulator, limited
):
    limits = {"rpm": 1000} if limited else {}
    acme = provision("acme", simulator.url, **limits)
    with silent_server() as port:
        env = server_env(
            REDIS_URL=f"redis://127.0.0.1:{port}/0",
            SWITCHYARD_REDIS_TIMEOUT_SECONDS=str(TIMEOUT),
            SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS=str(TIMEOUT),
        )
        server = start_daphne(env)
        try:
            started = time.monotonic()
            answer = httpx.post(
                server.url + "/v1/responses",
                headers={"authorization": f"Bearer {acme.key}"},
                json={"model": "sim-model", "input": "hello"},
                timeout=60,
            )
            took = time.monotonic() - started
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            assert error["code"] == "unavailable" and "retry" in error["message"]
            assert answer.headers["retry-after"]
            assert took < BOUND, f"the 503 took {took:.1f} s"
            rows = wait_rows(organisation=acme.organisation)
            assert [(str(row.request_id), row.status) for row in rows] == [
                (answer.headers["x-request-id"], 503)
            ]
        finally:
            server.stop()
