"""Health checks against a real llama-server: online with its build and its
models, offline after two consecutive failures once the process is gone."""

from __future__ import annotations

import concurrent.futures
import contextlib

import httpx
import pytest
from openai import APIStatusError

from responses_api.backends.health import FAILURES_TO_OFFLINE, backend_check
from responses_api.models import Backend
from tests.conftest import wait_for, wait_rows
from tests.llamacpp.conftest import UPSTREAM_MODEL, start_llama_server

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
]


def build_info(server) -> str:
    return httpx.get(server.root + "/props", timeout=5).json()["build_info"]


def test_a_health_check_finds_the_server_its_build_and_its_models(llama_plain):
    from responses_api.catalogue.services.backends import backend_ensure

    backend, _ = backend_ensure(
        organisation=None, name="llama", base_url=llama_plain.url, dialect="llamacpp"
    )
    result = backend_check(backend=backend)
    assert result.ok
    backend.refresh_from_db()
    assert backend.health == Backend.Health.ONLINE
    assert backend.version == f"llama.cpp {build_info(llama_plain)}"
    assert backend.version.startswith("llama.cpp b")
    assert backend.reported_models == [UPSTREAM_MODEL]
    assert backend.latency_ms is not None and backend.last_error == ""


def test_a_killed_server_goes_offline_after_two_failures(llama_paths, llama_tenant):
    server = start_llama_server(llama_paths)
    try:
        tenant = llama_tenant(server)
        backend = tenant.backend
        backend_check(backend=backend)
        assert backend.health == Backend.Health.ONLINE
        # The version the check recorded is the one responses report.
        version = f"llama.cpp {build_info(server)}"
        wait_for(
            lambda: (
                tenant.client.responses.create(
                    model="stories", input="Hi", max_output_tokens=2
                ).switchyard["backend"]["version"]
                == version
            )
        )

        server.kill()
        backend_check(backend=backend)
        backend.refresh_from_db()
        assert backend.consecutive_failures == 1 and backend.last_error
        assert backend.health == Backend.Health.ONLINE  # one failure is not enough
        for _ in range(FAILURES_TO_OFFLINE - 1):
            backend_check(backend=backend)
        backend.refresh_from_db()
        assert backend.health == Backend.Health.OFFLINE
        assert backend.reported_models == [UPSTREAM_MODEL]  # the last known list stays

        def refused() -> APIStatusError:
            with pytest.raises(APIStatusError) as error:
                tenant.client.responses.create(model="stories", input="Hi", max_output_tokens=2)
            assert error.value.status_code == 503
            return error.value

        # Until the web process's catalog cache expires it still tries the
        # backend (503 backend_unreachable); then it knows it is offline.
        error = wait_for(lambda: (e := refused()).body["code"] == "no_backend_available" and e)
        assert error.response.headers["retry-after"]
        assert wait_rows(organisation=tenant.organisation, status=503)
    finally:
        server.stop()


def kept_signals(backend_id: str):
    """What routing reads of the backend's own load (in the process, or Redis)."""
    import asyncio
    from types import SimpleNamespace

    from responses_api.backends.routing import router

    route = SimpleNamespace(backend=SimpleNamespace(id=backend_id))
    return asyncio.run(router.state.observe([route], None, None)).signals[0]


def test_a_health_check_reads_the_servers_slots_as_its_load(llama_paths):
    from responses_api.backends.scoring import NO_SIGNALS, Signals
    from responses_api.catalogue.services.backends import backend_ensure

    server = start_llama_server(llama_paths, "-np", "2", "-c", "8192")
    try:
        backend, _ = backend_ensure(
            organisation=None, name="llama-slots", base_url=server.url, dialect="llamacpp"
        )
        assert backend_check(backend=backend).signals == Signals(0, 0.0)
        body = {"messages": [{"role": "user", "content": "Once"}], "max_tokens": 1500}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            # One of its two slots generating (past the end of its story).
            busy = pool.submit(
                httpx.post,
                server.url + "/chat/completions",
                json={**body, "ignore_eos": True},
                timeout=60,
            )
            wait_for(lambda: backend_check(backend=backend).signals == Signals(0, 0.5), timeout=30)
            assert kept_signals(str(backend.id)) == Signals(0, 0.5)
            assert not busy.done()  # still generating when it was seen busy
            # Killed mid-generation: the story's end is not worth the wait.
            server.kill()
            with contextlib.suppress(httpx.HTTPError):
                busy.result()
        for _ in range(FAILURES_TO_OFFLINE):
            backend_check(backend=backend)
        # Offline: what it said of itself is forgotten.
        assert kept_signals(str(backend.id)) == NO_SIGNALS
    finally:
        server.stop()
