"""The embedded default's background worker, in this process: a worker
paused past its lease is reaped, and when it wakes its writes are refused
(fencing) and it stops; and the worker runs a bounded number of responses
at once, the others waiting queued."""

from __future__ import annotations

import logging
import time

import httpx
import pytest

from responses_api.background import run as background_run
from tests.conftest import usage_rows, wait_for
from tests.store.test_background import _local_worker, _poll  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def direct(gateway, provision, people, local_simulator):
    """Acme's client, straight to the simulator (its own counts)."""
    from tests.store.conftest import store_policy

    store_policy(people["acme"])
    acme = provision("acme", local_simulator.url, dialect="vllm")
    stats_url = local_simulator.url.removesuffix("/v1") + "/_sim/stats"
    return gateway.openai(acme.key), lambda: httpx.get(stats_url).json()


def test_a_worker_paused_past_its_lease_is_reaped_and_its_late_writes_are_refused(
    direct, settings, caplog
):
    client, stats = direct
    settings.SWITCHYARD_BACKGROUND_LEASE_SECONDS = 1.0
    caplog.set_level(logging.WARNING, logger="responses_api.background.run")
    disconnects = stats()["disconnects"]
    raw = client.responses.with_raw_response.create(
        model="sim-model", input="[[rate:20]] [[tokens:200]] slowly", background=True
    )
    queued = raw.parse()
    _poll(client, queued.id, "in_progress")
    wait_for(lambda: stats()["in_flight"] > 0, timeout=10)
    # The worker's thread stops dead for three leases (a long pause of its
    # process): it neither renews its lease nor writes meanwhile.
    loop = background_run.local_worker.loop
    assert loop is not None
    loop.call_soon_threadsafe(time.sleep, 3.0)
    failed = _poll(client, queued.id, "failed", timeout=10)
    assert failed.error is not None and "stopped before it finished" in failed.error.message
    with client.responses.stream(response_id=queued.id) as stream:
        reaped = [event.type for event in stream]
    # Awake again, the worker finds the response taken and stops: it ends
    # its backend request well before the 10 s the answer takes.
    wait_for(lambda: not background_run.local_worker.running, timeout=5)
    wait_for(lambda: stats()["disconnects"] > disconnects, timeout=5)
    assert "taken from this worker" in caplog.text
    after = client.responses.retrieve(queued.id)
    assert after.status == "failed"
    assert after.model_dump() == failed.model_dump()
    with client.responses.stream(response_id=queued.id) as stream:
        assert [event.type for event in stream] == reaped
    assert reaped[-1] == "response.failed" and reaped.count("response.failed") == 1
    wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    time.sleep(0.5)  # a second row, were one handed over, would be written by now
    rows = usage_rows(request_id=raw.headers["x-request-id"])
    assert [(row.status, row.error_code) for row in rows] == [(500, "worker_lost")]


def test_the_worker_runs_a_bounded_number_at_once_and_queues_the_rest(direct, settings):
    client, stats = direct
    settings.SWITCHYARD_BACKGROUND_LOCAL_CONCURRENCY = 2
    # The backend is shared with the tests before: their responses may still run.
    wait_for(
        lambda: stats()["in_flight"] == 0 and not background_run.local_worker.running, timeout=60
    )
    created = [
        client.responses.create(
            model="sim-model", input=f"[[rate:20]] [[tokens:30]] number {n}", background=True
        )
        for n in range(6)
    ]
    # The backend's own count of the requests it serves at once, sampled
    # until every response has ended.
    seen: list[int] = []
    statuses: set[str] = set()

    def ended() -> bool:
        seen.append(stats()["in_flight"])
        statuses.update(client.responses.retrieve(r.id).status for r in created[-2:])
        return not background_run.local_worker.running

    wait_for(ended, timeout=60, interval=0.02)
    assert max(seen) == 2
    assert "queued" in statuses  # the last ones waited their turn, not refused
    assert [client.responses.retrieve(r.id).status for r in created] == ["completed"] * 6
