"""A request holds its worst case under its spend limits while it runs:
its estimated prompt and its output limit (``max_output_tokens``, else the
model's default) at the model's prices. Another request is refused while
the holds fill the budget; the row gives the hold back, whether the
request was served or refused by a rate limit. At the ASGI boundary, with
Redis when REDIS_URL is set, else the process's memory."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import orjson
import pytest

from responses_api.pipeline import exchange as exchange_module
from responses_api.runtime import redis_conn
from responses_api.usage.holds import local_holds
from responses_api.usage.monthly import month_start
from tests.api.test_consumer import Client, run, scope

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# Free input, 0.25 per output token, 8 output tokens unless asked for fewer:
# a request holds 2.00, or 0.25 per token of its max_output_tokens.
PRICES = {
    "price_input": Decimal(0),
    "price_cached_input": Decimal(0),
    "price_output": Decimal(250_000),
    "default_max_output_tokens": 8,
}


@pytest.fixture
def settled(monkeypatch) -> list[dict[str, Any]]:
    """The rows handed over, with what goes to Redis with them (the spend
    settlement, the leases) still sent."""
    handed: list[dict[str, Any]] = []

    class Sink:
        def submit(self, row: dict[str, Any], scripts=(), then=()):
            handed.append(row)
            if redis_conn.enabled() and (scripts or then):
                return redis_conn.run_batch(then, scripts)
            return None

    monkeypatch.setattr(exchange_module, "sink", Sink())
    return handed


@pytest.fixture
def budgeted(provision, simulator):
    from accounts.models import ApiKey
    from responses_api.catalogue.services.served_models import model_ensure

    def make(**key_options):
        tenant = provision("acme", simulator.url, **key_options)
        model_ensure(
            organisation=tenant.organisation,
            public_id="sim-model",
            backend=tenant.backend,
            **PRICES,
        )
        key = ApiKey.objects.get(organisation=tenant.organisation, name="acme key")
        return tenant, str(key.id)

    yield make
    if redis_conn.enabled():
        client = redis_conn.sync_client()
        for name in client.scan_iter(match="sy:spend:key:*"):
            client.delete(name)
        client.close()


def request(text: str, **fields) -> bytes:
    return orjson.dumps({"model": "sim-model", "input": text, "stream": True, **fields})


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


async def served(key: str, text: str, **fields) -> Client:
    client = Client(scope(key))
    await client.send_body(request(text, **fields))
    await client.read_all()
    await client.app.wait(5)
    return client


def test_a_request_in_progress_holds_its_output_limit_at_the_model_prices(budgeted, settled):
    tenant, key_id = budgeted(monthly_budget=Decimal("2.00"))
    seen: dict[str, Any] = {}

    async def main() -> None:
        # The model's default output (8 tokens) holds 2.00: the whole budget.
        holder = Client(scope(tenant.key))
        await holder.send_body(request("hold [[tokens:2]] [[delay:1500]]"))
        await holder.read_until(b"response.in_progress")
        seen["held"] = held(key_id)
        refused = await served(tenant.key, "refused [[tokens:1]]")
        seen["refused"] = (refused.status(), orjson.loads(refused.received.split(b"\n")[0]))
        await holder.read_all()
        await holder.app.wait(5)
        seen["after"] = held(key_id)
        # Spent 0.50. Asking for 4 tokens holds 1.00: room for another.
        second = Client(scope(tenant.key))
        await second.send_body(request("hold [[tokens:2]] [[delay:1500]]", max_output_tokens=4))
        await second.read_until(b"response.in_progress")
        seen["held_small"] = held(key_id)
        third = await served(tenant.key, "third [[tokens:2]]", max_output_tokens=2)
        seen["third"] = third.status()
        await second.read_all()
        await second.app.wait(5)

    run(main())
    assert seen["held"] == 2 * 10**8
    status, body = seen["refused"]
    assert status == 429
    assert body["error"]["code"] == "insufficient_quota"
    assert body["error"]["message"].startswith(
        "This API key has reached its monthly budget (0.00 of 2.00 used this month, UTC; "
        "2.00 held by requests in progress)."
    )
    assert seen["after"] == 0
    assert seen["held_small"] == 10**8
    assert seen["third"] == 200
    assert held(key_id) == 0
    assert [(r["status"], r["cost"]) for r in settled] == [
        (429, Decimal(0)),
        (200, Decimal("0.5")),
        (200, Decimal("0.5")),
        (200, Decimal("0.5")),
    ]


def test_a_request_the_rate_limits_refuse_gives_its_hold_back(budgeted, settled):
    tenant, key_id = budgeted(monthly_budget=Decimal("2.00"), rpm=1)

    async def main() -> list[Client]:
        return [await served(tenant.key, "hi [[tokens:2]]") for _ in range(2)]

    first, second = run(main())
    assert (first.status(), second.status()) == (200, 429)
    assert [(r["status"], r["error_code"]) for r in settled] == [
        (200, ""),
        (429, "rate_limit_exceeded"),
    ]
    assert held(key_id) == 0
