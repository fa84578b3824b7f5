"""Health checks: ``GET /v1/models`` records online/offline,
latency, version and served models; offline after consecutive failures,
online again after one success."""

from __future__ import annotations

import pytest

from responses_api.backends import health
from responses_api.backends.routing import router
from tests.conftest import start_simulator

pytestmark = [pytest.mark.live, pytest.mark.django_db]


def test_a_check_records_health_latency_version_and_models(people):
    from responses_api.catalogue.services.backends import backend_ensure

    sim = start_simulator("--models", "alpha,beta")
    try:
        backend, _ = backend_ensure(organisation=people["acme"], name="s", base_url=sim.url)
        result = health.backend_check(backend=backend)
        backend.refresh_from_db()
        assert result.ok and backend.health == "online"
        assert backend.reported_models == ["alpha", "beta"]
        assert backend.version == "switchyard-simulator/1"
        assert backend.latency_ms is not None and backend.latency_ms >= 0
        assert backend.last_checked_at is not None and backend.consecutive_failures == 0
    finally:
        sim.stop()


async def _mark(backend_id: str) -> None:
    await router.mark_suspect(backend_id)


def test_offline_after_consecutive_failures_and_online_after_one_success(people):
    import asyncio

    from responses_api.catalogue.services.backends import backend_ensure

    sim = start_simulator()
    url, port = sim.url, sim.port
    backend, _ = backend_ensure(organisation=people["acme"], name="s", base_url=url)
    assert health.backend_check(backend=backend).ok
    sim.stop()
    for _ in range(health.FAILURES_TO_OFFLINE - 1):
        assert not health.backend_check(backend=backend).ok
        backend.refresh_from_db()
        assert backend.health == "online"  # one failure is not enough
    health.backend_check(backend=backend)
    backend.refresh_from_db()
    assert backend.health == "offline" and "BackendUnreachable" in backend.last_error
    asyncio.run(_mark(str(backend.id)))
    revived = start_simulator_on(port)
    try:
        assert health.backend_check(backend=backend).ok
        backend.refresh_from_db()
        assert backend.health == "online" and backend.last_error == ""
        # A success also lifts the "suspect" mark requests put on it.
        assert not asyncio.run(router.state.is_suspect(str(backend.id)))
    finally:
        revived.stop()


def start_simulator_on(port: int):
    import subprocess
    import sys

    from tests.conftest import ROOT, Proc, _log_path, wait_http

    log = _log_path("simulator")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "simulator", "--port", str(port)],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    wait_http(f"http://127.0.0.1:{port}/v1/models", proc=process)
    return Proc(process, f"http://127.0.0.1:{port}/v1", port, log)
