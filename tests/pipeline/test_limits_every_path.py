"""Every request that makes a backend generate goes through the limits of
``POST /v1/responses`` (docs/admin/budgets.md and
docs/api/background.md): ``/responses/compact``, a ``compaction_trigger`` item,
``context_management`` compaction and a background response are refused
by a spent budget or token quota with the same 429 and the same row, hold
their spend while they run and count under the rate limits. A count of
input tokens counts as a request but holds and checks no spend.

In-process (``tests.inprocess``), against the simulator, with Redis when
REDIS_URL is set, else the process's memory."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal

import httpx
import orjson
import pytest

from responses_api.runtime import redis_conn
from responses_api.usage.holds import local_holds
from responses_api.usage.monthly import month_start
from tests.conftest import usage_rows, wait_for, wait_rows

pytestmark = pytest.mark.django_db(transaction=True)

# Free input, 0.25 per output token: "[[tokens:2]]" costs 0.50.
PRICES = {
    "price_input": Decimal(0),
    "price_cached_input": Decimal(0),
    "price_output": Decimal(250_000),
}


@pytest.fixture(autouse=True)
def _still_minute(settings):
    """One rate-limit window for the whole test: a minute that turns
    between two requests would reset their count."""
    settings.SWITCHYARD_TEST_RATE_LIMIT_NOW = float(int(time.time()) // 60 * 60 + 1)


@pytest.fixture
def local_worker(settings):
    """Background responses run on the web process's worker thread."""
    from asgiref.sync import SyncToAsync
    from django.db import connections

    from responses_api.background.run import local_worker

    settings.SWITCHYARD_BACKGROUND_RUNNER = "local"
    yield
    wait_for(lambda: not local_worker.running, timeout=30)
    local_worker.close()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def tenant(provision, local_simulator, people, gateway):
    """Acme, which stores responses, with one key limited as asked; the
    key's id. Its model is priced as above."""
    from accounts.audit import CLI
    from accounts.models import ApiKey
    from accounts.services.organisations import organisation_settings_update
    from responses_api.catalogue.services.served_models import model_ensure

    def make(**key_options):
        organisation_settings_update(
            organisation=people["acme"],
            actor=CLI,
            data={"retention_policy": "store", "store_ttl_hours": 24},
        )
        made = provision("acme", local_simulator.url, dialect="vllm", **key_options)
        model_ensure(
            organisation=made.organisation, public_id="sim-model", backend=made.backend, **PRICES
        )
        key = ApiKey.objects.get(organisation=made.organisation, name="acme key")
        return made, str(key.id)

    yield make
    if redis_conn.enabled():
        client = redis_conn.sync_client()
        for name in client.scan_iter(match="sy:spend:key:*"):
            client.delete(name)
        client.close()


def held(key_id: str) -> int:
    """What requests in progress hold under the key's budget (10⁻⁸ units)."""
    base = f"sy:spend:key:{key_id}:{month_start(time.time()):%Y%m}"
    if not redis_conn.enabled():
        return sum(units for units, _ in local_holds.held.get(base, {}).values())
    client = redis_conn.sync_client()
    try:
        return int(client.hget(base + ":h", "_u") or 0)
    finally:
        client.close()


def history(marker: str) -> list[dict]:
    return [
        {"role": "user", "content": f"Draft the {marker} report " + "with details " * 20},
        {"role": "assistant", "content": "Here is a long draft " * 20},
        {"role": "user", "content": f"Shorten it, {marker} [[tokens:2]]"},
    ]


SLOW_TURN = {"role": "user", "content": "Shorten it [[tokens:2]] [[delay:800]]"}

# Each path that makes a backend generate: its URL path and body.
PATHS = {
    "responses": ("/v1/responses", lambda m: {"input": f"{m} [[tokens:2]]"}),
    "compact": ("/v1/responses/compact", lambda m: {"input": history(m)}),
    "compaction_trigger": (
        "/v1/responses",
        lambda m: {"input": [*history(m), {"type": "compaction_trigger"}]},
    ),
    "context_management": (
        "/v1/responses",
        lambda m: {
            "input": history(m),
            "context_management": [{"type": "compaction", "compact_threshold": 10}],
        },
    ),
    "background": ("/v1/responses", lambda m: {"input": f"{m} [[tokens:2]]", "background": True}),
}


def post(gateway, key: str, path: str, body: dict) -> httpx.Response:
    return gateway.http.post(
        path,
        headers={"authorization": f"Bearer {key}"},
        json={"model": "sim-model", **body},
    )


def reached(simulator, marker: str) -> bool:
    """Whether the backend got a request mentioning ``marker``."""
    answer = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/requests", timeout=5)
    return marker in answer.text


def organisation_budget(organisation, amount: str) -> None:
    """The organisation's budget, its counters (of an earlier test's
    organisation with the same id) forgotten."""
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update
    from responses_api.usage.spend import local_counters

    base = f"sy:spend:organisation:{organisation.id}:"
    for key in [k for k in local_counters.counters if k.startswith(base)]:
        del local_counters.counters[key]
    if redis_conn.enabled():
        client = redis_conn.sync_client()
        for name in client.scan_iter(match=base + "*"):
            client.delete(name)
        client.close()
    organisation_settings_update(
        organisation=organisation, actor=CLI, data={"monthly_budget": amount}
    )


LIMITS = {
    # 0.25 or 1 token: the first request (0.50, 2+ tokens) spends it.
    "key budget": ({"monthly_budget": Decimal("0.25")}, "API key", "budget"),
    "key token quota": ({"monthly_tokens": 1}, "API key", "token quota"),
    "organisation budget": ({}, "organisation", "budget"),
}


@pytest.mark.parametrize("limit", list(LIMITS))
@pytest.mark.parametrize("path", list(PATHS))
def test_a_spent_limit_refuses_every_path_that_generates(
    gateway, tenant, local_simulator, local_worker, path, limit
):
    key_options, whose, what = LIMITS[limit]
    made, key_id = tenant(**key_options)
    if whose == "organisation":
        organisation_budget(made.organisation, "0.25")
    first = post(gateway, made.key, "/v1/responses", {"input": "spend it [[tokens:2]]"})
    assert first.status_code == 200, first.text
    marker = uuid.uuid4().hex[:10]
    url, body = PATHS[path]
    refused = post(gateway, made.key, url, body(marker))
    assert refused.status_code == 429, refused.text
    assert refused.headers["x-should-retry"] == "false"
    assert refused.headers["x-request-id"]
    error = refused.json()["error"]
    assert error["code"] == error["type"] == "insufficient_quota"
    assert error["message"].startswith(f"This {whose} has reached its monthly {what}")
    assert not reached(local_simulator, marker)
    (row,) = usage_rows(request_id=refused.headers["x-request-id"])
    assert (row.endpoint, row.status, row.error_code, row.cost) == (
        url.removeprefix("/v1"),
        429,
        "insufficient_quota",
        0,
    )
    # Nothing stays held: not by the request that was served, nor the refused one.
    assert held(key_id) == 0


@pytest.mark.parametrize("path", list(PATHS))
def test_a_spent_budget_wins_over_a_rate_limit_on_every_path(gateway, tenant, local_worker, path):
    """Both reached: the 429 says the budget, which no retry within the minute clears."""
    made, _ = tenant(monthly_budget=Decimal("0.25"), rpm=1)
    assert post(gateway, made.key, "/v1/responses", {"input": "[[tokens:2]]"}).status_code == 200
    url, body = PATHS[path]
    refused = post(gateway, made.key, url, body(uuid.uuid4().hex[:10]))
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "insufficient_quota"
    assert "retry-after" not in refused.headers


def completed(gateway, key: str, response_id: str) -> dict:
    def ended():
        answer = gateway.http.get(
            f"/v1/responses/{response_id}", headers={"authorization": f"Bearer {key}"}
        ).json()
        return answer if answer["status"] not in ("queued", "in_progress") else None

    return wait_for(ended, timeout=30)


@pytest.mark.parametrize("path", [*PATHS, "input_tokens"])
def test_each_path_counts_as_one_request_under_the_rate_limits(gateway, tenant, local_worker, path):
    made, _ = tenant(rpm=2)
    url, body = PATHS.get(path) or ("/v1/responses/input_tokens", lambda m: {"input": m})
    answers = [post(gateway, made.key, url, body(uuid.uuid4().hex[:10])) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429], answers[-1].text
    assert answers[2].json()["error"]["code"] == "rate_limit_exceeded"
    assert answers[2].headers["retry-after"]
    assert answers[1].headers["x-ratelimit-remaining-requests"] == "0"
    if path == "background":
        # The worker runs each under the limits again, but counts no second request.
        for answer in answers[:2]:
            assert completed(gateway, made.key, answer.json()["id"])["status"] == "completed"
    rows = wait_for(
        lambda: (
            (rows := rows_of(gateway, api_key_id=_key_id(made), method="POST"))
            and len(rows) == 3
            and rows
        )
    )
    assert sorted((r.endpoint, r.status, r.error_code) for r in rows) == sorted(
        [(url.removeprefix("/v1"), 200, "")] * 2
        + [(url.removeprefix("/v1"), 429, "rate_limit_exceeded")]
    )


def rows_of(gateway, **filters) -> list:
    """The rows so far, with those a worker handed over since the last request."""
    gateway.rows.write()
    return usage_rows(**filters)


def _key_id(made) -> str:
    from accounts.models import ApiKey

    return str(ApiKey.objects.get(organisation=made.organisation, name="acme key").id)


@pytest.mark.parametrize("path", ["compact", "compaction_trigger", "context_management"])
def test_what_a_compaction_generates_is_spent_and_its_hold_given_back(
    gateway, tenant, local_simulator, path
):
    made, key_id = tenant(monthly_budget=Decimal("0.25"))
    url, body = PATHS[path]
    served = post(gateway, made.key, url, body(uuid.uuid4().hex[:10]))
    assert served.status_code == 200, served.text
    (row,) = usage_rows(request_id=served.headers["x-request-id"])
    assert row.status == 200 and row.cost > Decimal("0.25")
    assert held(key_id) == 0
    after = post(gateway, made.key, "/v1/responses", {"input": "more [[tokens:1]]"})
    assert after.status_code == 429 and after.json()["error"]["code"] == "insufficient_quota"


def test_a_background_response_holds_its_spend_while_its_worker_runs(gateway, tenant, local_worker):
    made, key_id = tenant(monthly_budget=Decimal("100.00"))
    queued = post(
        gateway,
        made.key,
        "/v1/responses",
        {"input": "[[tokens:2]] [[delay:1500]]", "background": True, "max_output_tokens": 4},
    )
    assert queued.status_code == 200 and queued.json()["status"] == "queued", queued.text
    # 4 output tokens at 0.25, held while it runs; given back by its row.
    assert wait_for(lambda: held(key_id) == 10**8, timeout=10)
    done = completed(gateway, made.key, queued.json()["id"])
    assert done["status"] == "completed"
    (row,) = wait_for(lambda: rows_of(gateway, request_id=queued.headers["x-request-id"]))
    assert row.status == 200 and row.cost == Decimal("0.5")
    assert wait_for(lambda: held(key_id) == 0, timeout=10)


def test_a_token_count_checks_no_spend_and_holds_none(gateway, tenant):
    made, key_id = tenant(monthly_budget=Decimal("0.25"))
    assert post(gateway, made.key, "/v1/responses", {"input": "[[tokens:2]]"}).status_code == 200
    counted = post(gateway, made.key, "/v1/responses/input_tokens", {"input": "how long?"})
    assert counted.status_code == 200, counted.text
    assert counted.json()["input_tokens"] > 0
    (row,) = usage_rows(request_id=counted.headers["x-request-id"])
    assert (row.endpoint, row.status, row.cost) == ("/responses/input_tokens", 200, 0)
    assert held(key_id) == 0


def test_a_request_that_may_compact_first_holds_for_both_of_its_calls(tenant, gateway):
    from tests.api.test_consumer import Client, run, scope

    made, key_id = tenant(monthly_budget=Decimal("100.00"))
    seen = {}

    async def hold_of(**fields) -> int:
        # 4 output tokens at 0.25: 1.00 a backend call.
        body = {"model": "sim-model", "stream": True, "max_output_tokens": 4, **fields}
        client = Client(scope(made.key))
        await client.send_body(orjson.dumps(body))
        await client.read_until(b"response.in_progress")
        held_now = held(key_id)
        await client.read_all()
        await client.app.wait(5)
        return held_now

    async def main() -> None:
        seen["plain"] = await hold_of(input=history("plain")[:2] + [SLOW_TURN])
        seen["compacting"] = await hold_of(
            input=history("compacting")[:2] + [SLOW_TURN],
            context_management=[{"type": "compaction", "compact_threshold": 10}],
        )

    run(main())
    assert seen == {"plain": 10**8, "compacting": 2 * 10**8}
    assert held(key_id) == 0


# --- WebSocket mode: a live server, a WebSocket needing a real socket ---------------


@pytest.fixture
def socket_tenant(provision, simulator):
    """Acme with one limited key, behind the live server; its model priced as above."""
    from responses_api.catalogue.services.served_models import model_ensure

    def make(**key_options):
        made = provision("acme", simulator.url, **key_options)
        model_ensure(
            organisation=made.organisation, public_id="sim-model", backend=made.backend, **PRICES
        )
        return made

    return make


def socket_turns(server, key: str, frames: list[dict]) -> list[dict]:
    """The last event each frame got: its terminal event or its error."""
    from websockets.sync.client import connect

    from tests.api.test_websocket import frames_until_done, ws_url

    with connect(ws_url(server), additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        ends = []
        for frame in frames:
            ws.send(
                orjson.dumps({"type": "response.create", "model": "sim-model", **frame}).decode()
            )
            ends.append(frames_until_done(ws)[-1])
    return ends


@pytest.mark.live
def test_a_spent_budget_refuses_a_websocket_turn_but_not_a_prewarm(api_server, socket_tenant):
    made = socket_tenant(monthly_budget=Decimal("0.25"))
    marker = uuid.uuid4().hex[:10]
    spend, refused, prewarm = socket_turns(
        api_server,
        made.key,
        [
            {"input": "spend it [[tokens:2]]"},
            {"input": f"{marker} [[tokens:2]]"},
            {"input": "warm up", "generate": False},
        ],
    )
    assert spend["type"] == "response.completed", spend
    assert refused["type"] == "error" and refused["status"] == 429, refused
    assert refused["error"]["code"] == "insufficient_quota"
    assert refused["error"]["message"].startswith("This API key has reached its monthly budget")
    assert prewarm["type"] == "response.completed", prewarm
    rows = wait_rows(3, organisation=made.organisation)
    assert [(r.method, r.status, r.error_code, r.cost) for r in rows] == [
        ("WS", 200, "", Decimal("0.5")),
        ("WS", 429, "insufficient_quota", 0),
        ("WS", 200, "", 0),
    ]


@pytest.mark.live
def test_a_prewarm_counts_as_a_request_under_the_rate_limits(api_server, socket_tenant):
    made = socket_tenant(rpm=1)
    prewarm, refused = socket_turns(
        api_server,
        made.key,
        [{"input": "warm up", "generate": False}, {"input": "[[tokens:2]]"}],
    )
    assert prewarm["type"] == "response.completed", prewarm
    assert refused["type"] == "error" and refused["status"] == 429, refused
    assert refused["error"]["code"] == "rate_limit_exceeded"
    rows = wait_rows(2, organisation=made.organisation)
    assert [(r.method, r.status, r.error_code) for r in rows] == [
        ("WS", 200, ""),
        ("WS", 429, "rate_limit_exceeded"),
    ]
