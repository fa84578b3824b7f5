"""Background responses on the embedded default's worker thread, in a real
daphne process: every response leaves exactly its one usage row, written
by a usage writer that no other loop's thread wakes (no "bound to a
different event loop" error), and SIGTERM drains the worker as it drains
HTTP streams."""

from __future__ import annotations

import signal

import httpx
import pytest

from tests.conftest import server_env, start_daphne, usage_rows
from tests.store.conftest import store_policy
from tests.support import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

MANY = 200


def _embedded(**extra: str) -> dict[str, str]:
    """The embedded default's server: no Redis, the worker in the process."""
    return server_env(REDIS_URL="", SWITCHYARD_BACKGROUND_RUNNER="local", **extra)


def test_every_background_response_leaves_one_row_and_no_loop_error(people, provision, simulator):
    store_policy(people["acme"])
    acme = provision("acme", simulator.url)
    server = start_daphne(_embedded())
    try:
        http = httpx.Client(
            base_url=server.url, headers={"authorization": f"Bearer {acme.key}"}, timeout=30
        )
        request_ids, response_ids = [], []
        for n in range(MANY):
            created = http.post(
                "/v1/responses",
                json={"model": "sim-model", "input": f"[[tokens:2]] go {n}", "background": True},
            )
            assert created.status_code == 200, created.text
            request_ids.append(created.headers["x-request-id"])
            response_ids.append(created.json()["id"])
            # A request on the web loop between the worker's runs: both
            # loops hand rows over in turn.
            assert http.get("/v1/models").status_code == 200
        for response_id in response_ids:
            wait_until(
                lambda r=response_id: (
                    http.get(f"/v1/responses/{r}").json()["status"] == "completed"
                ),
                timeout=60,
            )
        rows = wait_until(
            lambda: (
                len(found := usage_rows(endpoint="/responses", method="POST")) >= MANY and found
            ),
            timeout=10,
            message=lambda: f"{len(usage_rows(endpoint='/responses', method='POST'))} of {MANY}",
        )
        assert sorted(str(row.request_id) for row in rows) == sorted(request_ids)
        assert {row.status for row in rows} == {200}
    finally:
        server.stop()
    assert "different event loop" not in server.output()


GRACE = 4.0


def test_sigterm_drains_the_worker_then_fails_what_is_left_with_its_row(
    people, provision, simulator
):
    from responses_api.store.responses import response_get

    store_policy(people["acme"])
    acme = provision("acme", simulator.url)
    server = start_daphne(
        _embedded(
            SWITCHYARD_SHUTDOWN_GRACE_SECONDS=str(GRACE),
            SWITCHYARD_BACKGROUND_LOCAL_CONCURRENCY="2",
        )
    )
    try:
        http = httpx.Client(
            base_url=server.url, headers={"authorization": f"Bearer {acme.key}"}, timeout=30
        )

        def create(prompt: str) -> tuple[str, str]:
            created = http.post(
                "/v1/responses", json={"model": "sim-model", "input": prompt, "background": True}
            )
            assert created.status_code == 200, created.text
            return created.headers["x-request-id"], created.json()["id"]

        # One that ends within the grace (~1.6 s), one that cannot (~40 s),
        # and one queued behind them (two run at once) that never starts.
        short = create("[[rate:5]] [[tokens:8]] short")
        long = create("[[rate:5]] [[tokens:200]] long")
        queued = create("[[rate:5]] [[tokens:200]] queued")
        status = lambda r: http.get(f"/v1/responses/{r[1]}").json()["status"]  # noqa: E731
        wait_until(lambda: status(long) == "in_progress", timeout=10)
        assert status(queued) == "queued"
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=GRACE + 20)
        assert server.process.returncode == 0, server.output()
    finally:
        server.stop()
    org = acme.organisation.pk

    def stored(pair: tuple[str, str]) -> dict:
        found = response_get(organisation_id=org, response_id=pair[1])
        assert found is not None
        return found.response

    assert stored(short)["status"] == "completed"
    for pair in (long, queued):
        failed = stored(pair)
        assert failed["status"] == "failed"
        assert "shutting down" in failed["error"]["message"]
    rows = {str(r.request_id): r for r in usage_rows(endpoint="/responses", method="POST")}
    assert set(rows) == {short[0], long[0], queued[0]}
    assert rows[short[0]].status == 200
    for pair in (long, queued):
        row = rows[pair[0]]
        assert (row.status, row.error_code) == (503, "server_shutting_down")
    assert 0 < rows[long[0]].output_tokens < 200
