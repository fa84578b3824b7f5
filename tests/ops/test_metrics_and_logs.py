"""``/metrics`` after real traffic, and the one JSON log line per request.

A daphne process runs with METRICS_TOKEN and LOG_FORMAT=json; traffic covers a
completed request, a stream, a stream the client abandons (499), an invalid
request (400) and a backend that rate-limits (429).
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import server_env, start_daphne, wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TOKEN = "metrics-token-for-tests-5b1f"
UPSTREAM_KEY = "upstream-secret-8d2c41"
PROMPT = "PROMPT-zebra-7781 tell me a secret"
ANSWER = "ANSWER-quokka-5512"


def scrape(url: str, token: str | None = TOKEN) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url + "/metrics", headers=headers, timeout=10)


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(found, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


def run_traffic(url: str, key: str, backend_id: str) -> None:
    client = OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    assert client.responses.create(model="sim-model", input=f"{PROMPT} [[text:{ANSWER}]]")
    with client.responses.stream(model="sim-model", input="[[tokens:7]]") as stream:
        stream.get_final_response()
    # A stream the client abandons after the first delta: a 499.
    with httpx.stream(
        "POST",
        url + "/v1/responses",
        headers={"authorization": f"Bearer {key}"},
        json={"model": "sim-model", "input": "[[rate:5]] [[tokens:100]]", "stream": True},
        timeout=30,
    ) as response:
        for line in response.iter_lines():
            if "output_text.delta" in line:
                break
    bad = httpx.post(
        url + "/v1/responses",
        headers={"authorization": f"Bearer {key}"},
        json={"model": "sim-model", "input": "x", "temperature": 9},
        timeout=10,
    )
    assert bad.status_code == 400
    # A backend's 429 reaches the client when the backend is pinned.
    limited = httpx.post(
        url + "/v1/responses",
        headers={"authorization": f"Bearer {key}", "x-backend-id": backend_id},
        json={"model": "sim-model", "input": "[[status:429]]"},
        timeout=10,
    )
    assert limited.status_code == 429


@pytest.fixture
def tenant(provision, simulator):
    from responses_api.backends.health import backend_check
    from responses_api.catalogue.services.backends import backend_ensure

    acme = provision("acme", simulator.url)
    backend, _ = backend_ensure(
        organisation=acme.organisation, name="sim", base_url=simulator.url, api_key=UPSTREAM_KEY
    )
    backend_check(backend=backend)
    return acme


@pytest.mark.parametrize("multiprocess", [False, True], ids=["one-process", "multiprocess-dir"])
def test_metrics_count_requests_tokens_and_499s(tenant, tmp_path, multiprocess):
    env = server_env(METRICS_TOKEN=TOKEN)
    if multiprocess:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)
    server = start_daphne(env)
    try:
        assert scrape(server.url, None).status_code == 401
        assert scrape(server.url, "wrong-token").status_code == 401
        before = samples(scrape(server.url).text)
        run_traffic(server.url, tenant.key, str(tenant.backend.id))
        wait_rows(5, organisation=tenant.organisation)
        response = scrape(server.url)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        after = samples(response.text)
    finally:
        server.stop()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    ok = {"model": "sim-model", "backend": "sim"}
    assert moved("switchyard_requests_total", status="200", **ok) == 2
    assert moved("switchyard_requests_total", status="499", **ok) == 1
    assert moved("switchyard_requests_total", status="400", model="", backend="") == 1
    assert moved("switchyard_requests_total", status="429", **ok) == 1
    limited = {"model": "sim-model", "code": "rate_limit_exceeded"}
    assert moved("switchyard_rate_limited_total", **limited) == 1
    assert moved("switchyard_tokens_total", kind="output", **ok) >= 1 + 7
    assert moved("switchyard_tokens_total", kind="input", **ok) > 0
    assert moved("switchyard_time_to_first_token_seconds_count", **ok) >= 2
    assert moved("switchyard_request_duration_seconds_count", stream="true", **ok) == 2
    assert moved("switchyard_queue_wait_seconds_count", model="sim-model") >= 3
    assert value(after, "switchyard_backend_in_flight", backend="sim") == 0
    backend_id = str(tenant.backend.id)
    up = {"backend": "sim", "backend_id": backend_id, "organisation": "acme"}
    assert value(after, "switchyard_backend_up", **up) == 1


def test_metrics_are_off_without_a_token(api_server):
    assert scrape(api_server.url).status_code == 404


def _is_access_log(line: str) -> bool:
    return bool(re.match(r'^\S+ - - \[[^]]+\] "[A-Z]+ ', line)) or not line.strip()


def test_one_json_line_per_request_without_prompts_answers_or_keys(tenant):
    server = start_daphne(server_env(LOG_FORMAT="json", LOG_LEVEL="INFO"))
    try:
        run_traffic(server.url, tenant.key, str(tenant.backend.id))
        rows = wait_rows(5, organisation=tenant.organisation)
    finally:
        server.stop()
    output = server.output()
    for secret in (PROMPT, "zebra-7781", ANSWER, tenant.key, UPSTREAM_KEY):
        assert secret not in output
    # daphne's own access log ("GET /healthz" 200 ...) is plain text; every
    # line that the application logs is JSON.
    lines = [json.loads(line) for line in output.splitlines() if not _is_access_log(line)]
    requests = {e["request_id"]: e for e in lines if e["logger"] == "switchyard.requests"}
    assert set(requests) == {str(r.request_id) for r in rows}
    completed = next(e for e in requests.values() if e["status"] == 200 and not e["stream"])
    assert completed["organisation_id"] == tenant.organisation.id
    assert completed["key_prefix"] and tenant.key.startswith(completed["key_prefix"].rstrip("…"))
    assert completed["model"] == "sim-model" and completed["backend_name"] == "sim"
    assert completed["output_tokens"] > 0 and completed["input_tokens"] > 0
    assert completed["duration_ms"] > 0 and completed["ttft_ms"] is not None
    assert completed["level"] == "INFO" and completed["ts"]
    assert sorted(e["status"] for e in requests.values()) == [200, 200, 400, 429, 499]
