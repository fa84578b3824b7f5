"""``/readyz`` through a short outage of Redis or the database.

The outage is real: the dependency is reached through a TCP proxy that the
test cuts (open connections dropped, new ones closed at once) and restores.
During ``SWITCHYARD_READY_GRACE_SECONDS`` the process stays ready and names
what is failing; after it, 503; once the dependency is back, ready again.
``/healthz`` answers 200 throughout: it is liveness only."""

from __future__ import annotations

import time

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from responses_api import views
from tests.conftest import server_env, start_daphne, wait_for
from tests.ops.outages import PASSWORD, TcpProxy, redis_server

GRACE = 2.0


@pytest.fixture
def fresh_outages():
    views.outages.since.clear()
    views._redis_probes.clear()
    yield
    views.outages.since.clear()
    views._redis_probes.clear()


def _blip(get, proxy: TcpProxy, dependency: str, grace: float, hang: bool = False) -> None:
    """Ready, cut (or hanging): degraded then unavailable, restored: ready again."""
    # A probe's first connection on a loaded machine can outlast its timeout:
    # the test starts from a dependency seen answering.
    ready = wait_for(lambda: (r := get("/readyz")).json()["status"] == "ok" and r, timeout=15)
    assert ready.status_code == 200 and ready.json()["checks"][dependency] == "ok", ready.text

    if hang:
        proxy.hang()
    else:
        proxy.cut()
    cut_at = time.monotonic()
    degraded = get("/readyz")
    assert degraded.status_code == 200, degraded.text
    body = degraded.json()
    assert body["status"] == "degraded" and body["degraded"] == [dependency]
    assert body["checks"][dependency].startswith("error: ")
    if hang:  # nothing refused: the probe's own timeout told
        assert "Timeout" in body["checks"][dependency], body
    assert all(v == "ok" for k, v in body["checks"].items() if k != dependency)
    assert body["grace_seconds"] == grace
    assert get("/healthz").status_code == 200

    def unavailable():
        answer = get("/readyz")
        return answer.status_code == 503 and answer

    answer = wait_for(unavailable, timeout=grace + 30, interval=0.2)
    assert time.monotonic() - cut_at >= grace
    assert answer.json()["status"] == "unavailable" and answer.json()["degraded"] == [dependency]
    assert answer.json()["failing_seconds"][dependency] >= grace
    assert get("/healthz").status_code == 200

    proxy.restore()
    back = wait_for(lambda: (r := get("/readyz")).status_code == 200 and r, timeout=30)
    assert back.json() == {"status": "ok", "checks": back.json()["checks"]}
    assert back.json()["checks"][dependency] == "ok"


@pytest.mark.django_db
@pytest.mark.parametrize("hang", [False, True], ids=["refused", "unanswered"])
def test_a_redis_blip_leaves_the_process_ready_until_the_grace_window_ends(
    gateway, tmp_path, fresh_outages, hang
):
    with redis_server(tmp_path) as server:
        proxy = TcpProxy(("127.0.0.1", server.port))
        url = f"redis://:{PASSWORD}@127.0.0.1:{proxy.port}/0"
        try:
            with override_settings(REDIS_URL=url, SWITCHYARD_READY_GRACE_SECONDS=GRACE):
                _blip(gateway.http.get, proxy, "redis", GRACE, hang=hang)
        finally:
            proxy.close()


def test_the_grace_window_restarts_with_each_outage(gateway, tmp_path, fresh_outages, db):
    """A dependency that came back starts its next outage from zero."""
    with redis_server(tmp_path) as server:
        proxy = TcpProxy(("127.0.0.1", server.port))
        url = f"redis://:{PASSWORD}@127.0.0.1:{proxy.port}/0"
        try:
            with override_settings(REDIS_URL=url, SWITCHYARD_READY_GRACE_SECONDS=GRACE):
                proxy.cut()
                first = gateway.http.get("/readyz").json()
                assert first["status"] == "degraded"
                proxy.restore()
                wait_for(lambda: gateway.http.get("/readyz").json()["status"] == "ok", timeout=30)
                proxy.cut()
                again = gateway.http.get("/readyz").json()
                assert again["status"] == "degraded"
                assert again["failing_seconds"]["redis"] < GRACE
        finally:
            proxy.close()


@pytest.mark.live
@pytest.mark.django_db
@pytest.mark.parametrize("hang", [False, True], ids=["refused", "unanswered"])
def test_a_database_blip_leaves_a_live_process_ready_until_the_grace_window_ends(hang):
    """Refused: the database's host is up but PostgreSQL is not. Unanswered:
    packets vanish, and only the probe's own timeout tells."""
    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("postgresql"):
        pytest.skip("a database blip needs PostgreSQL over TCP (DATABASE_URL=postgres://...)")
    proxy = TcpProxy((db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)))
    auth = db.get("USER") or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    grace = 4.0
    env = server_env(SWITCHYARD_READY_GRACE_SECONDS=str(grace))
    env["DATABASE_URL"] = f"postgres://{auth}@127.0.0.1:{proxy.port}/{db['NAME']}"
    server = start_daphne(env=env)
    try:
        get = lambda path: httpx.get(server.url + path, timeout=10)  # noqa: E731
        _blip(get, proxy, "database", grace, hang=hang)
    finally:
        server.stop()
        proxy.close()


@pytest.mark.django_db
def test_probes_and_scrapers_may_address_a_pod_by_its_ip(gateway, fresh_outages):
    """The kubelet and Prometheus send ``Host: <pod IP>:8000``, which is not
    in ALLOWED_HOSTS; the operational endpoints answer it, nothing else does."""
    pod = {"host": "10.42.7.19:8000"}
    assert gateway.http.get("/healthz", headers=pod).status_code == 200
    assert gateway.http.get("/readyz", headers=pod).json()["status"] == "ok"
    with override_settings(METRICS_TOKEN="scrape-token"):
        assert gateway.http.get("/metrics", headers=pod).status_code == 401
        scraped = gateway.http.get(
            "/metrics", headers={**pod, "authorization": "Bearer scrape-token"}
        )
        assert scraped.status_code == 200 and "switchyard_" in scraped.text
    assert gateway.http.get("/console/login/", headers=pod).status_code == 400
    assert gateway.http.get("/console/login/").status_code == 200


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_grace_window_counts_from_the_first_request_that_failed(provision, simulator, tmp_path):
    """The requests saw Redis fail before any probe did: the window started
    then, so the first probe past it is already a 503."""
    acme = provision("acme", simulator.url)
    with redis_server(tmp_path) as redis:
        proxy = TcpProxy(("127.0.0.1", redis.port))
        url = f"redis://:{PASSWORD}@127.0.0.1:{proxy.port}/0"
        server = start_daphne(server_env(REDIS_URL=url, SWITCHYARD_READY_GRACE_SECONDS=str(GRACE)))
        try:
            get = lambda path: httpx.get(server.url + path, timeout=10)  # noqa: E731
            assert get("/readyz").json()["status"] == "ok"
            proxy.cut()
            refused = httpx.post(
                server.url + "/v1/responses",
                headers={"authorization": f"Bearer {acme.key}"},
                json={"model": "sim-model", "input": "hello"},
                timeout=30,
            )
            assert refused.status_code == 503, refused.text
            failed_at = time.monotonic()
            time.sleep(GRACE + 0.5)
            probe = get("/readyz")
            assert time.monotonic() - failed_at >= GRACE
            assert probe.status_code == 503, probe.text
            assert probe.json()["status"] == "unavailable"
            assert probe.json()["failing_seconds"]["redis"] >= GRACE
            proxy.restore()
            wait_for(lambda: get("/readyz").status_code == 200, timeout=30, interval=0.2)
        finally:
            server.stop()
            proxy.close()
