"""Behind a TLS proxy: plain HTTP is redirected, except probes and scrapes."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import server_env, start_daphne

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_plain_http_is_redirected_but_probes_and_proxied_https_are_not():
    env = server_env(SWITCHYARD_BEHIND_TLS="true", SECURE_SSL_REDIRECT="true", METRICS_TOKEN="t")
    server = start_daphne(env)
    try:
        console = httpx.get(server.url + "/console/", timeout=10)
        assert console.status_code == 301
        assert console.headers["location"].startswith("https://")
        for path in ("/healthz", "/readyz", "/metrics"):
            response = httpx.get(server.url + path, timeout=10)
            assert response.status_code in (200, 401), (path, response.status_code)
        proxied = httpx.get(
            server.url + "/console/login/", headers={"x-forwarded-proto": "https"}, timeout=10
        )
        assert proxied.status_code == 200
        assert "max-age=31536000" in proxied.headers["strict-transport-security"]
        assert "; secure" in proxied.headers["set-cookie"].lower()  # the CSRF cookie
    finally:
        server.stop()
