"""platform/nginx/switchyard.conf, run for real in front of two web processes.

The benchmark's ``--processes N`` serves through this configuration
(``bench/nginx.py`` derives it: the bench's ports, plain HTTP, the run's
directory); here a real nginx runs it: requests are spread over both
processes, SSE passes through unbuffered, and the API's own 413 envelope
answers an oversized body.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import ROOT, Proc, _log_path, free_port, start_daphne, wait_http

sys.path.insert(0, str(ROOT / "bench"))
import nginx  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def behind_nginx(tmp_path):
    if nginx.binary() is None:
        message = "nginx is not installed (apt-get install nginx)"
        if __import__("os").environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    web = [start_daphne(), start_daphne()]
    listen = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(nginx.config(listen=listen, upstreams=[w.port for w in web], prefix=tmp_path))
    nginx.check(conf, tmp_path)
    log = _log_path("nginx")
    process = subprocess.Popen(
        nginx.command(conf, tmp_path), stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{listen}"
    proxy = Proc(process, url, listen, log)
    try:
        wait_http(url + "/healthz", proc=process)
        yield url, web
    finally:
        proxy.stop()
        for server in web:
            server.stop()


def test_streams_pass_through_unbuffered_and_both_processes_serve(
    behind_nginx, simulator, provision
):
    url, web = behind_nginx
    tenant = provision("acme", simulator.url)
    headers = {"authorization": f"Bearer {tenant.key}"}
    body = {"model": "sim-model", "input": "[[rate:5]] [[tokens:10]]", "stream": True}
    started = time.monotonic()
    first = None
    with httpx.stream(
        "POST", url + "/v1/responses", headers=headers, json=body, timeout=30
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if first is None and "response.output_text.delta" in line:
                first = time.monotonic() - started
    total = time.monotonic() - started
    # Ten tokens at five a second: two seconds in all; buffered, the first
    # delta would arrive with the last.
    assert first is not None and total >= 1.5 and first < total - 1.0

    # least_conn over two idle processes: sequential requests reach both.
    ids = set()
    for _ in range(8):
        answer = httpx.post(
            url + "/v1/responses",
            headers=headers,
            json={"model": "sim-model", "input": "hi"},
            timeout=30,
        )
        assert answer.status_code == 200
        ids.add(answer.headers["x-request-id"])
    assert len(ids) == 8
    served = [w.output().count("switchyard.requests") for w in web]
    assert all(served), served


def test_an_oversized_body_gets_the_api_envelope(behind_nginx):
    url, _ = behind_nginx
    answer = httpx.post(
        url + "/v1/responses",
        content=b"x" * (17 * 1024 * 1024),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 413
    assert json.loads(answer.text)["error"]["code"] == "request_too_large"
