"""A monthly budget holds across web processes: 200 requests sent at once
through four daphne processes sharing PostgreSQL and Redis, against an
organisation whose budget pays for a handful of them, spend at most the
budget plus one request's reservation (docs/admin/budgets.md). Without
the reservation every request of the burst would see the same untouched
budget and all would be served."""

from __future__ import annotations

import asyncio
import itertools
import os
from decimal import Decimal

import httpx
import pytest

from responses_api.protocol.body import CreateResponse
from responses_api.translate.request import ModelLimits, prepare_chat
from tests.conftest import server_env, start_daphne, wait_rows
from tests.routing.conftest import needs_redis, started

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    needs_redis,
]

REQUESTS = 200
PROCESSES = 4
BUDGET = Decimal("10.00")
# 0.01 per input token, 0.25 per output token; the model lets a request
# produce 8 tokens unless it asks for fewer.
PRICES = {"price_input": Decimal(10_000), "price_cached_input": Decimal(10_000)}
PRICE_OUTPUT = Decimal(250_000)
DEFAULT_OUTPUT = 8
TEXT = "spend [[tokens:4]] [[delay:300]]"


def reservation() -> Decimal:
    """What one request of the burst holds while it runs: its prompt's
    estimate and the model's default output, at the model's prices."""
    from responses_api.pipeline.exchange import prompt_tokens

    request = CreateResponse.model_validate({"model": "sim-model", "input": TEXT})
    draft = prepare_chat(request, limits=ModelLimits(default_max_output_tokens=DEFAULT_OUTPUT))
    assert draft.max_output_tokens == DEFAULT_OUTPUT
    return (prompt_tokens(draft) * Decimal("0.01") + DEFAULT_OUTPUT * Decimal("0.25")).quantize(
        Decimal("0.00000001")
    )


def spend_keys(organisation_id: int) -> list[str]:
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        return [
            k.decode() for k in client.scan_iter(match=f"sy:spend:organisation:{organisation_id}:*")
        ]
    finally:
        client.close()


@pytest.fixture
def budgeted(people, simulator):
    """Acme with a budget of 10.00, a priced model on the simulator, a key,
    and no counters left by an earlier test database's organisation of the
    same id."""
    import redis

    from accounts.audit import CLI
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_settings_update
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    acme = people["acme"]
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    for key in spend_keys(acme.id):
        client.delete(key)
    client.close()
    backend, _ = backend_ensure(
        organisation=acme, name="sim", base_url=simulator.url, max_concurrency=REQUESTS
    )
    model_ensure(
        organisation=acme,
        public_id="sim-model",
        backend=backend,
        upstream_name="sim-model",
        default_max_output_tokens=DEFAULT_OUTPUT,
        price_output=PRICE_OUTPUT,
        **PRICES,
    )
    organisation_settings_update(organisation=acme, actor=CLI, data={"monthly_budget": BUDGET})
    _, key = api_key_create(organisation=acme, name="burst")
    return acme, key


async def burst(urls: list[str], key: str) -> list[httpx.Response]:
    """Every request sent at once, in turn to each process (as a load
    balancer would), each on its own connection."""
    limits = httpx.Limits(max_connections=REQUESTS, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        turns = itertools.cycle(urls)
        return await asyncio.gather(
            *(
                client.post(
                    next(turns) + "/v1/responses",
                    headers={"authorization": f"Bearer {key}"},
                    json={"model": "sim-model", "input": TEXT},
                )
                for _ in range(REQUESTS)
            )
        )


# Four web processes start (seconds each on a loaded machine), then 200
# requests and their rows go through them.
@pytest.mark.timeout(300)
def test_a_burst_over_four_processes_overspends_by_at_most_one_reservation(budgeted, capsys):
    import redis

    acme, key = budgeted
    servers = started(PROCESSES, lambda: start_daphne(server_env(SWITCHYARD_QUEUE_TIMEOUT="60")))
    try:
        responses = asyncio.run(burst([server.url for server in servers], key))
    finally:
        for server in servers:
            server.stop()
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, statuses
    rows = wait_rows(REQUESTS, organisation=acme, timeout=120)
    assert len(rows) == REQUESTS
    served = [r for r in rows if r.status == 200]
    assert len(served) == statuses.count(200)
    spent = sum((r.cost for r in rows), Decimal(0))
    hold = reservation()
    with capsys.disabled():
        print(
            f"\n{REQUESTS} requests over {PROCESSES} processes: {len(served)} served, "
            f"spent {spent} of a {BUDGET} budget (one reservation: {hold})"
        )
    # No request cost more than it held: what the bound rests on.
    assert all(r.cost <= hold for r in served)
    assert spent <= BUDGET + hold, (spent, hold)
    # Nothing was refused while the holds left room: at least as many were
    # served as holds fit in the budget.
    assert len(served) >= BUDGET // hold

    refusals = [r.json()["error"] for r in responses if r.status_code == 429]
    assert {(e["code"], e["type"]) for e in refusals} == {("insufficient_quota",) * 2}
    # Some were refused for what requests in progress held, before it was
    # spent: the burst did run concurrently.
    assert any("held by requests in progress" in e["message"] for e in refusals)

    # The counter holds what the rows cost, and every hold went back.
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        keys = spend_keys(acme.id)
        counter = next(k for k in keys if k.endswith(":c"))
        assert int(client.get(counter)) == int(spent * 100_000_000)
        holds = next(k for k in keys if k.endswith(":h"))
        assert int(client.hget(holds, "_u") or 0) == 0
        assert client.hlen(holds) <= 2  # the totals, nothing held
    finally:
        client.close()
