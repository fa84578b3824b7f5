"""Routing across live backends: least loaded, affinity,
pinning, failover, no backend, saturation. Run against one daphne, or two
sharing Redis when REDIS_URL is set."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import uuid

import httpx
import orjson
import pytest
from openai import OpenAI

from tests.conftest import start_simulator, usage_rows, wait_for, wait_rows
from tests.routing.conftest import KEEPALIVE, QUEUE_TIMEOUT, needs_redis, sim_stats

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def post(url: str, key: str, body: dict, headers: dict | None = None, **kw) -> httpx.Response:
    return httpx.post(
        url + "/v1/responses",
        headers={"authorization": f"Bearer {key}", **(headers or {})},
        json={"model": "sim-model", **body},
        timeout=kw.pop("timeout", 30),
        **kw,
    )


def sse_events(text: str) -> list[dict]:
    return [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_least_loaded_spreads_concurrent_requests(web, sims, fleet_for):
    fleet = fleet_for(sims)
    before = [sim_stats(s)["requests"] for s in sims]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        urls = [web.next_url() for _ in range(12)]
        results = list(
            pool.map(lambda u: post(u, fleet.key, {"input": "hold [[delay:1500]]"}), urls)
        )
    assert [r.status_code for r in results] == [200] * 12
    served = [sim_stats(s)["requests"] - b for s, b in zip(sims, before, strict=True)]
    # 12 overlapping requests over 3 idle backends: least-loaded gives each
    # about a third (exactly 4 when all overlap; a little slack for stragglers).
    assert sum(served) == 12
    assert all(3 <= n <= 5 for n in served), served
    rows = wait_rows(12, organisation=fleet.organisation)
    assert {str(r.backend_id) for r in rows} == {str(b.id) for b in fleet.backends}


def _conversation_turns(web, key, *, cache_key: str | None, turns: int = 4):
    items: list[dict] = [
        {"role": "developer", "content": "You are a terse assistant. " * 20},
        {"role": "user", "content": f"Start conversation {uuid.uuid4()}"},
    ]
    responses = []
    for turn in range(turns):
        body = {"input": items}
        if cache_key:
            body["prompt_cache_key"] = cache_key
        response = post(web.next_url(), key, body)
        assert response.status_code == 200, response.text
        data = response.json()
        responses.append(data)
        items = [
            *items,
            {"role": "assistant", "content": data["output"][0]["content"][0]["text"]},
            {"role": "user", "content": f"And turn {turn + 2}?"},
        ]
    return responses


@pytest.mark.parametrize("cache_key", ["session-", None])
def test_affinity_keeps_a_conversation_on_one_backend_and_cached_tokens_grow(
    web, sims, fleet_for, cache_key
):
    # A key of this run's own (made here: every xdist worker must collect
    # the same test ids).
    cache_key = cache_key and cache_key + uuid.uuid4().hex
    fleet = fleet_for(sims)
    responses = _conversation_turns(web, fleet.key, cache_key=cache_key)
    backends = {r["switchyard"]["backend"]["id"] for r in responses}
    assert len(backends) == 1, "the conversation moved between backends"
    cached = [r["usage"]["input_tokens_details"]["cached_tokens"] for r in responses]
    inputs = [r["usage"]["input_tokens"] for r in responses]
    # Each turn re-sends the previous turn's whole prompt: the backend that ran
    # it has all of it in its prefix cache, and the cached part grows.
    for turn in range(1, len(responses)):
        assert inputs[turn - 1] <= cached[turn] < inputs[turn]
    assert all(later > earlier for earlier, later in zip(cached, cached[1:], strict=False))


def test_pinned_request_runs_on_the_named_backend(web, sims, fleet_for):
    fleet = fleet_for(sims)
    target = fleet.backends[2]
    for _ in range(4):
        response = post(
            web.next_url(), fleet.key, {"input": "hi"}, {"x-backend-id": str(target.id)}
        )
        assert response.status_code == 200
        assert response.headers["x-backend-id"] == str(target.id)
        assert response.headers["x-backend-name"] == target.name
    rows = wait_rows(4, organisation=fleet.organisation)
    assert {str(r.backend_id) for r in rows} == {str(target.id)}


def test_pinning_fails_loudly_and_never_reroutes(web, sims, fleet_for, provision):
    from responses_api.models import Backend

    fleet = fleet_for(sims)
    foreign = provision("globex", sims[0].url, backend_name="globex-sim").backend
    for pinned in (str(uuid.uuid4()), str(foreign.id), "not-a-uuid"):
        response = post(web.next_url(), fleet.key, {"input": "hi"}, {"x-backend-id": pinned})
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "backend_not_found"
    offline = fleet.backends[1]
    Backend.objects.filter(pk=offline.pk).update(health="offline")
    response = wait_for(
        lambda: (
            (
                r := post(
                    web.next_url(), fleet.key, {"input": "hi"}, {"x-backend-id": str(offline.id)}
                )
            ).status_code
            == 503
            and r
        )
    )
    assert response.json()["error"]["code"] == "backend_offline"
    assert int(response.headers["retry-after"]) > 0
    assert "x-backend-id" not in response.headers


def test_killed_backend_fails_over_before_the_first_token_and_goes_offline(web, fleet_for):
    from console.tasks import check_backends
    from responses_api.models import Backend

    victims = [start_simulator(), start_simulator()]
    try:
        fleet = fleet_for(victims)
        session = "failover-" + uuid.uuid4().hex
        first = post(web.next_url(), fleet.key, {"input": "hi", "prompt_cache_key": session})
        dead_id = first.headers["x-backend-id"]
        dead = next(v for v, b in zip(victims, fleet.backends, strict=True) if str(b.id) == dead_id)
        survivor = next(b for b in fleet.backends if str(b.id) != dead_id)
        dead.process.send_signal(signal.SIGKILL)
        dead.process.wait(10)
        # The conversation prefers the dead backend: its requests must move to
        # the survivor without the client seeing anything, streamed or not.
        client = OpenAI(base_url=web.next_url() + "/v1", api_key=fleet.key, max_retries=0)
        response = client.responses.create(
            model="sim-model", input="again", prompt_cache_key=session
        )
        assert response.status == "completed"
        with client.responses.stream(
            model="sim-model", input="stream", prompt_cache_key=session + "-2"
        ) as stream:
            final = stream.get_final_response()
        assert final.status == "completed"
        for _ in range(4):
            assert post(web.next_url(), fleet.key, {"input": "more"}).status_code == 200
        rows = wait_rows(7, organisation=fleet.organisation)
        assert all(r.status == 200 for r in rows)
        moved = [r for r in rows[1:] if r.attempts > 1]
        assert moved, "no request was tried on the dead backend first"
        assert all(str(r.backend_id) == str(survivor.id) for r in rows[1:])
        check_backends()
        check_backends()
        assert Backend.objects.get(pk=dead_id).health == "offline"
        assert Backend.objects.get(pk=survivor.id).health == "online"
    finally:
        for proc in victims:
            proc.stop()


def test_no_backend_online_is_a_503_with_retry_after(web, sims, fleet_for):
    from responses_api.models import Backend

    fleet = fleet_for(sims[:2])
    Backend.objects.filter(organisation=fleet.organisation).update(health="offline")
    response = wait_for(
        lambda: (r := post(web.next_url(), fleet.key, {"input": "hi"})).status_code == 503 and r
    )
    error = response.json()["error"]
    assert error["code"] == "no_backend_available"
    assert "sim-model" in error["message"] and "offline" in error["message"]
    assert int(response.headers["retry-after"]) > 0
    row = wait_rows(1, organisation=fleet.organisation, status=503)[0]
    assert row.error_code == "no_backend_available"


def test_saturated_backends_queue_then_serve(web, sims, fleet_for):
    fleet = fleet_for(sims[:1], max_concurrency=1)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        holder = pool.submit(post, web.next_url(), fleet.key, {"input": "hold [[delay:1200]]"})
        wait_for(lambda: sim_stats(sims[0])["in_flight"] >= 1)
        waiter = pool.submit(post, web.next_url(), fleet.key, {"input": "after"})
        assert holder.result().status_code == 200
        response = waiter.result()
    assert response.status_code == 200
    assert response.json()["switchyard"]["timing"]["queue_wait_ms"] > 200
    rows = wait_rows(2, organisation=fleet.organisation)
    assert max(r.queue_wait_ms for r in rows) > 200
    assert sim_stats(sims[0])["max_in_flight"] >= 1


def test_saturation_bound_gives_503_before_a_stream_and_failed_after(web, sims, fleet_for):
    fleet = fleet_for(sims[1:2], max_concurrency=1)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        hold = f"hold [[delay:{int((QUEUE_TIMEOUT + 2) * 1000)}]]"
        holder = pool.submit(post, web.next_url(), fleet.key, {"input": hold})
        wait_for(lambda: sim_stats(sims[1])["in_flight"] >= 1)
        plain = pool.submit(post, web.next_url(), fleet.key, {"input": "waits"})
        streamed = pool.submit(
            post, web.next_url(), fleet.key, {"input": "waits too", "stream": True}
        )
        plain, streamed = plain.result(), streamed.result()
        assert holder.result().status_code == 200
    # Not streamed: a normal HTTP 503 once the bound passed.
    assert plain.status_code == 503
    assert plain.json()["error"]["code"] == "backends_saturated"
    assert int(plain.headers["retry-after"]) > 0
    # Streamed: the stream started while queued, kept the client informed
    # with response.in_progress, then ended with response.failed.
    assert streamed.status_code == 200
    events = sse_events(streamed.text)
    types = [e["type"] for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types.count("response.in_progress") >= int(QUEUE_TIMEOUT / KEEPALIVE) - 2
    assert types[-1] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "server_error"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    rows = wait_rows(3, organisation=fleet.organisation)
    assert sorted(r.status for r in rows) == [200, 503, 503]
    assert all(r.queue_wait_ms >= QUEUE_TIMEOUT * 1000 * 0.9 for r in rows if r.status == 503)
    assert usage_rows(organisation=fleet.organisation, error_code="backends_saturated")


def test_a_backend_refusing_before_the_first_token_is_retried_elsewhere(web, fleet_for):
    """A backend that answers 429/5xx before sending anything (here: over its
    own concurrency limit) costs the client nothing: another backend answers."""
    strict, relaxed = start_simulator("--max-concurrency", "1"), start_simulator()
    try:
        fleet = fleet_for([strict, relaxed])
        strict_id = str(fleet.backends[0].id)
        # Find a conversation that lives on the strict backend.
        for _ in range(30):
            session = "refuse-" + uuid.uuid4().hex
            first = post(web.next_url(), fleet.key, {"input": "hi", "prompt_cache_key": session})
            if first.headers["x-backend-id"] == strict_id:
                break
        else:
            pytest.fail("no conversation landed on the strict backend")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pin = {"x-backend-id": strict_id}
            holder = pool.submit(post, web.next_url(), fleet.key, {"input": "[[delay:2000]]"}, pin)
            wait_for(lambda: sim_stats(strict)["in_flight"] >= 1)
            moved = post(web.next_url(), fleet.key, {"input": "again", "prompt_cache_key": session})
            assert holder.result().status_code == 200
        assert moved.status_code == 200, moved.text
        assert moved.headers["x-backend-id"] == str(fleet.backends[1].id)
        assert sim_stats(strict)["rejected"] >= 1
        row = usage_rows(request_id=moved.headers["x-request-id"]) or wait_rows(
            1, request_id=moved.headers["x-request-id"]
        )
        assert row[0].attempts == 2 and str(row[0].backend_id) == str(fleet.backends[1].id)
    finally:
        strict.stop()
        relaxed.stop()


@pytest.mark.parametrize("directive", ["[[drop-after:3]]", "[[fail-after:3]]"])
def test_a_failure_after_the_first_token_ends_the_stream_with_response_failed(
    web, sims, fleet_for, directive
):
    fleet = fleet_for(sims[:2])
    response = post(web.next_url(), fleet.key, {"input": f"go {directive}", "stream": True})
    assert response.status_code == 200
    events = sse_events(response.text)
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 3
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "server_error"
    assert [e["type"] for e in events].count("response.created") == 1
    row = wait_rows(1, organisation=fleet.organisation)[0]
    # Not retried elsewhere: the client had already seen tokens.
    assert row.attempts == 1 and row.status == 502 and row.output_tokens == 3


@needs_redis
def test_slots_held_by_a_dead_process_come_back_when_their_lease_expires(web, sims, fleet_for):
    """A web process that died mid-request never released its slot; its lease
    expired (it was no longer renewed), so the slot counts as free."""
    import time

    import redis

    fleet = fleet_for(sims[:1], max_concurrency=1)
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    inflight = f"sy:backend:{fleet.backends[0].id}:inflight"
    client.zadd(inflight, {"lease-of-a-dead-process": time.time() - 1})
    client.zadd(inflight, {"lease-of-a-live-process": time.time() + 60})
    try:
        refused = post(web.next_url(), fleet.key, {"input": "hi"})
        assert refused.status_code == 503  # the live lease fills the only slot
        client.zrem(inflight, "lease-of-a-live-process")
        assert post(web.next_url(), fleet.key, {"input": "hi"}).status_code == 200
        assert client.zscore(inflight, "lease-of-a-dead-process") is None
    finally:
        client.delete(inflight)
        client.close()
