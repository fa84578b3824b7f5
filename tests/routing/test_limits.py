"""Rate limits: requests/min, tokens/min and concurrent requests,
per key and per organisation, shared by every web process (two daphnes on
Redis when REDIS_URL is set). Over a limit → 429 with Retry-After and
x-ratelimit-* headers, and a usage row with status 429."""

from __future__ import annotations

import concurrent.futures

import httpx
import orjson
import pytest

from tests.conftest import wait_for, wait_rows
from tests.routing.conftest import sim_stats

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def post(url: str, key: str, text: str = "hi [[tokens:4]]") -> httpx.Response:
    return httpx.post(
        url + "/v1/responses",
        headers={"authorization": f"Bearer {key}"},
        json={"model": "sim-model", "input": text},
        timeout=30,
    )


def test_requests_per_minute_per_key_across_processes(still_web, sims, fleet_for):
    fleet = fleet_for(sims[:1], rpm=3)
    responses = [post(still_web.next_url(), fleet.key) for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert [r.headers["x-ratelimit-remaining-requests"] for r in responses[:3]] == ["2", "1", "0"]
    for response in responses:
        assert response.headers["x-ratelimit-limit-requests"] == "3"
        assert response.headers["x-ratelimit-reset-requests"].endswith("s")
    refused = responses[3]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    error = refused.json()["error"]
    assert error["type"] == "rate_limit_error" and error["code"] == "rate_limit_exceeded"
    assert "3 requests per minute" in error["message"]
    rows = wait_rows(4, organisation=fleet.organisation)
    assert sorted(r.status for r in rows) == [200, 200, 200, 429]


def test_organisation_limit_counts_all_its_keys_together(still_web, sims, fleet_for, people):
    from accounts.services.api_keys import api_key_create

    people["acme"].default_rpm = 2
    people["acme"].save()
    fleet = fleet_for(sims[:1])
    _, other_key = api_key_create(organisation=people["acme"], name="second")
    statuses = [
        post(still_web.next_url(), key).status_code for key in (fleet.key, other_key, other_key)
    ]
    assert statuses == [200, 200, 429]
    # Another organisation is not affected.
    globex = fleet_for(sims[:1], org="globex")
    assert post(still_web.next_url(), globex.key).status_code == 200


def test_tokens_per_minute_counts_the_estimate_then_real_usage(still_web, sims, fleet_for):
    fleet = fleet_for(sims[:1], tpm=120)
    payload = orjson.dumps({"model": "sim-model", "input": "hi [[tokens:30]]"})
    estimate = len(payload) // 4  # what admission counts before the backend says

    def send() -> httpx.Response:
        return httpx.post(
            still_web.next_url() + "/v1/responses",
            headers={"authorization": f"Bearer {fleet.key}", "content-type": "application/json"},
            content=payload,
            timeout=30,
        )

    totals: list[int] = []
    response = send()
    assert response.headers["x-ratelimit-limit-tokens"] == "120"
    assert response.headers["x-ratelimit-remaining-tokens"] == str(120 - estimate)
    while response.status_code == 200 and len(totals) < 10:
        usage = response.json()["usage"]
        totals.append(usage["input_tokens"] + usage["output_tokens"])
        # The window is corrected after the last byte, in the round trip that
        # hands the request's usage row over: once the row is in, so is the
        # correction.
        wait_rows(len(totals), organisation=fleet.organisation)
        response = send()
    assert response.status_code == 429
    # Each finished request left its real token count in the window (not the
    # estimate): the refusal came exactly when real usage + this estimate
    # would pass the limit.
    assert sum(totals[:-1]) + estimate <= 120 < sum(totals) + estimate
    assert response.headers["x-ratelimit-remaining-tokens"] == str(max(120 - sum(totals), 0))
    assert "tokens per minute" in response.json()["error"]["message"]
    assert int(response.headers["retry-after"]) >= 1


def test_concurrent_requests_per_key(web, sims, fleet_for):
    fleet = fleet_for(sims[:1], concurrency=1)
    sim = sims[0]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        holder = pool.submit(post, web.next_url(), fleet.key, "hold [[delay:1500]]")
        wait_for(lambda: sim_stats(sim)["in_flight"] >= 1)
        refused = post(web.next_url(), fleet.key)
        assert holder.result().status_code == 200
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert "1 concurrent requests" in refused.json()["error"]["message"]
    # The slot came back when the holder finished.
    assert post(web.next_url(), fleet.key).status_code == 200


def test_a_key_without_limits_gets_no_rate_limit_headers(web, sims, fleet_for):
    fleet = fleet_for(sims[:1])
    response = post(web.next_url(), fleet.key)
    assert response.status_code == 200
    assert not [h for h in response.headers if h.startswith("x-ratelimit")]
