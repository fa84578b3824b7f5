"""Scored routing across live simulator backends: a conversation follows the
backend holding its prefix, a full holder spills to the next best, another
organisation's prefix counts for nothing, and Codex turn-state tokens pin a
turn (never across organisations, never by failing). Each row says why its
backend was chosen."""

from __future__ import annotations

import concurrent.futures
import signal
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import Proc, server_env, start_daphne, start_simulator, wait_for, wait_rows
from tests.routing.conftest import QUEUE_TIMEOUT, Web, sim_stats

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TURN_STATE = "x-codex-turn-state"


@pytest.fixture(scope="module")
def prefix_web(django_db_setup, django_db_blocker) -> Iterator[Web]:
    """A web process whose score has no affinity term: what keeps a
    conversation in place is its prefix alone."""
    env = server_env(
        SWITCHYARD_QUEUE_TIMEOUT=str(QUEUE_TIMEOUT), SWITCHYARD_ROUTING_AFFINITY_WEIGHT="0"
    )
    server = start_daphne(env)
    yield Web([server])
    server.stop()


def post(url: str, key: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(
        url + "/v1/responses",
        headers={"authorization": f"Bearer {key}", **(headers or {})},
        json={"model": "sim-model", **body},
        timeout=30,
    )


def conversation(url_of, key: str, turns: int, model: str = "sim-model") -> list[dict]:
    """A coding-agent-like conversation: a long system prompt, each turn
    sending the whole history again."""
    items: list[dict] = [
        {"role": "developer", "content": "You are a careful coding agent. " * 40},
        {"role": "user", "content": f"Fix the bug in session {uuid.uuid4()}"},
    ]
    answers = []
    for turn in range(turns):
        response = post(url_of(), key, {"input": items, "model": model})
        assert response.status_code == 200, response.text
        data = response.json()
        answers.append(data)
        items = [
            *items,
            {"role": "assistant", "content": data["output"][0]["content"][0]["text"]},
            {"role": "user", "content": f"Now step {turn + 2}, please. " * 10},
        ]
    return answers


def rows_by_request(organisation, count: int) -> dict[str, object]:
    return {str(r.request_id): r for r in wait_rows(count, organisation=organisation)}


def test_a_conversation_follows_the_backend_holding_its_prefix(prefix_web, sims, fleet_for):
    fleet = fleet_for(sims)
    answers = conversation(prefix_web.next_url, fleet.key, turns=4)
    assert len({a["switchyard"]["backend"]["id"] for a in answers}) == 1
    rows = rows_by_request(fleet.organisation, 4)
    ordered = [rows[a["switchyard"]["request_id"]] for a in answers]
    assert ordered[0].route_reason == "least-loaded" and ordered[0].prefix_reused_tokens == 0
    assert [r.route_reason for r in ordered[1:]] == ["prefix"] * 3
    expected = [r.prefix_reused_tokens for r in ordered[1:]]
    assert expected[0] > 0 and expected == sorted(expected)
    # The backend did reuse what the index expected it to hold.
    assert all(r.cached_tokens > 0 for r in ordered[1:])


def test_with_the_default_weights_a_conversation_stays_by_affinity(web, sims, fleet_for):
    fleet = fleet_for(sims)
    answers = conversation(web.next_url, fleet.key, turns=3)
    assert len({a["switchyard"]["backend"]["id"] for a in answers}) == 1
    rows = rows_by_request(fleet.organisation, 3)
    later = [rows[a["switchyard"]["request_id"]] for a in answers[1:]]
    assert [r.route_reason for r in later] == ["affinity", "affinity"]
    assert all(r.prefix_reused_tokens > 0 for r in later)


def test_a_full_holder_spills_to_the_next_best(web, sims, fleet_for):
    fleet = fleet_for(sims[:2], max_concurrency=1)
    items = [
        {"role": "developer", "content": "You are a careful coding agent. " * 40},
        {"role": "user", "content": f"Start {uuid.uuid4()}"},
    ]
    first = post(web.next_url(), fleet.key, {"input": items})
    holder = first.headers["x-backend-id"]
    holder_sim = sims[[str(b.id) for b in fleet.backends].index(holder)]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = pool.submit(
            post,
            web.next_url(),
            fleet.key,
            {"input": "hold [[delay:3000]]"},
            {"x-backend-id": holder},
        )
        wait_for(lambda: sim_stats(holder_sim)["in_flight"] == 1, timeout=10)
        items = [
            *items,
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "next"},
        ]
        second = post(web.next_url(), fleet.key, {"input": items})
        assert second.status_code == 200, second.text
        assert second.headers["x-backend-id"] != holder
        assert busy.result().status_code == 200
    row = rows_by_request(fleet.organisation, 3)[second.headers["x-request-id"]]
    assert row.route_reason == "least-loaded" and row.queue_wait_ms < 1000


@pytest.fixture
def shared_fleet(sims, people):
    """Two platform backends (shared) serving ``shared-model`` to acme and globex."""
    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    keys = {}
    tag = uuid.uuid4().hex[:8]
    backends = [
        backend_ensure(organisation=None, name=f"shared{i}-{tag}", base_url=sim.url)[0]
        for i, sim in enumerate(sims[:2])
    ]
    for slug in ("acme", "globex"):
        for backend in backends:
            model_ensure(
                organisation=people[slug],
                public_id="shared-model",
                backend=backend,
                upstream_name="sim-model",
            )
        keys[slug] = api_key_create(organisation=people[slug], name="shared")[1]
    return keys


def test_another_organisations_prefix_gives_no_score(web, shared_fleet, people):
    acme = conversation(web.next_url, shared_fleet["acme"], turns=2, model="shared-model")
    acme_rows = rows_by_request(people["acme"], 2)
    assert acme_rows[acme[1]["switchyard"]["request_id"]].prefix_reused_tokens > 0
    # globex sends acme's first turn word for word.
    items = [
        {"role": "developer", "content": "You are a careful coding agent. " * 40},
        {"role": "user", "content": "Fix the bug"},
    ]
    post(web.next_url(), shared_fleet["acme"], {"input": items, "model": "shared-model"})
    theirs = post(web.next_url(), shared_fleet["globex"], {"input": items, "model": "shared-model"})
    assert theirs.status_code == 200
    row = rows_by_request(people["globex"], 1)[theirs.headers["x-request-id"]]
    assert (row.route_reason, row.prefix_reused_tokens) == ("least-loaded", 0)


def test_a_turn_state_token_pins_the_rest_of_the_turn(web, sims, fleet_for):
    fleet = fleet_for(sims)
    first = post(web.next_url(), fleet.key, {"input": f"turn {uuid.uuid4()}"})
    token, holder = first.headers[TURN_STATE], first.headers["x-backend-id"]
    assert token.startswith("sy1.") and holder not in token
    followers = [
        post(
            web.next_url(), fleet.key, {"input": f"tool output {uuid.uuid4()}"}, {TURN_STATE: token}
        )
        for _ in range(5)
    ]
    assert {r.headers["x-backend-id"] for r in followers} == {holder}
    assert {r.headers[TURN_STATE] for r in followers} == {token}
    rows = rows_by_request(fleet.organisation, 6)
    assert {rows[r.headers["x-request-id"]].route_reason for r in followers} == {"pinned"}


def test_forged_and_foreign_turn_state_tokens_pin_nothing(web, shared_fleet, people):
    acme, globex = shared_fleet["acme"], shared_fleet["globex"]
    body = {"input": "hello", "model": "shared-model"}
    theirs = post(web.next_url(), acme, body).headers[TURN_STATE]
    forged = "sy1." + "A" * 80
    responses = [
        post(web.next_url(), globex, body, {TURN_STATE: token})
        for token in (theirs, theirs, theirs, forged, forged, "not-a-token")
    ]
    assert [r.status_code for r in responses] == [200] * 6
    rows = rows_by_request(people["globex"], 6)
    assert "pinned" not in {rows[r.headers["x-request-id"]].route_reason for r in responses}
    # globex gets a token of its own, never acme's back.
    assert theirs not in {r.headers[TURN_STATE] for r in responses}


def test_a_pinned_turn_survives_its_backends_removal_by_falling_back(web, fleet_for):
    from responses_api.models import Backend

    replicas: list[Proc] = [start_simulator(), start_simulator()]
    try:
        fleet = fleet_for(replicas)
        first = post(web.next_url(), fleet.key, {"input": "first request of a turn"})
        token, holder = first.headers[TURN_STATE], first.headers["x-backend-id"]
        dead = replicas[[str(b.id) for b in fleet.backends].index(holder)]
        dead.process.send_signal(signal.SIGKILL)
        dead.process.wait()
        after_kill = post(web.next_url(), fleet.key, {"input": "a follow-up"}, {TURN_STATE: token})
        assert after_kill.status_code == 200, after_kill.text
        assert after_kill.headers["x-backend-id"] != holder
        # Removed from the model's backends: the token names nothing any more.
        Backend.objects.filter(pk=holder).update(enabled=False)
        follow = wait_for(
            lambda: (
                (
                    r := post(web.next_url(), fleet.key, {"input": "later"}, {TURN_STATE: token})
                ).status_code
                == 200
                and r.headers["x-backend-id"] != holder
                and r
            )
        )
        rows = rows_by_request(fleet.organisation, 3)
        assert rows[after_kill.headers["x-request-id"]].route_reason == "failover"
        assert rows[follow.headers["x-request-id"]].route_reason == "least-loaded"
        assert follow.headers[TURN_STATE] != token  # a token for where it now runs
    finally:
        for replica in replicas:
            replica.stop()


def test_a_model_on_one_backend_issues_no_turn_state(web, sims, provision):
    tenant = provision("acme", sims[0].url, backend_name="alone")
    response = post(web.next_url(), tenant.key, {"input": "hi"})
    assert response.status_code == 200 and TURN_STATE not in response.headers
    row = wait_rows(1, organisation=tenant.organisation)[0]
    assert (row.route_reason, row.prefix_reused_tokens) == ("least-loaded", 0)
