"""Spend holds (``responses_api.usage.holds``): admission checks what was
spent plus what requests in progress hold, and reserves its own worst case
in the same atomic step; a row gives its hold back while it adds what the
request cost. Run on Redis when REDIS_URL is set, else on the process's
memory, through the same functions the gateway calls."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync

from responses_api.runtime import redis_conn
from responses_api.usage.holds import (
    MISSING,
    REFUSED,
    RESERVED,
    reserve,
    reserve_result,
    spend_settle,
)
from responses_api.usage.monthly import month_start
from responses_api.usage.spend import COST_UNITS, SpendPlan, SpendScope, spend_rebuild

pytestmark = pytest.mark.django_db(transaction=True)

ONE = COST_UNITS  # 1.00 in counter units


@pytest.fixture
def key_id():
    """A key id no earlier test counted under; its Redis keys go after."""
    key = str(uuid.uuid4())
    yield key
    if os.environ.get("REDIS_URL"):
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        for name in client.scan_iter(match=f"sy:spend:key:{key}:*"):
            client.delete(name)
        client.close()


def plan_for(organisation, key_id: str, *, units: int = 0, tokens: int = 0, **limits) -> SpendPlan:
    scope = SpendScope("key", key_id, limits.get("budget"), limits.get("quota"))
    start = month_start(time.time())
    return SpendPlan(organisation.id, start, (scope,), 80, uuid.uuid4().hex, units, tokens)


async def admit(plan: SpendPlan) -> tuple[int, list[int]]:
    """What the gateway's admission does: reserve, rebuilding the counters
    from the rows when they are missing."""
    status, counts = reserve_result(plan, await reserve(plan))
    if status == MISSING:
        await spend_rebuild(plan)
        status, counts = reserve_result(plan, await reserve(plan))
    return status, counts


async def settle(plan: SpendPlan, cost: str, tokens: int = 0) -> None:
    row = {"cost": Decimal(cost), "input_tokens": tokens, "output_tokens": 0}
    for call in spend_settle(plan, row):
        await redis_conn.run_call(call)


async def closed() -> None:
    client = redis_conn._clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def scenario(steps):
    async def main():
        try:
            return await steps()
        finally:
            await closed()

    return async_to_sync(main)()


def test_a_hold_counts_until_its_row_settles_it_to_the_real_cost(people, key_id):
    acme = people["acme"]

    def hold(units: float) -> SpendPlan:
        return plan_for(acme, key_id, units=int(units * ONE), budget=Decimal(1))

    first, second, third, fourth = hold(0.6), hold(0.6), hold(0.6), hold(0.6)

    async def steps():
        results = [await admit(first), await admit(second), await admit(third)]
        await settle(first, "0.1")
        results.append(await admit(fourth))
        await settle(second, "0.2")
        await settle(fourth, "0")
        results.append(await admit(hold(0)))
        return results

    results = scenario(steps)
    # (spent, tokens spent, held, tokens held) before each admission.
    assert results[0] == (RESERVED, [0, 0, 0, 0])
    assert results[1] == (RESERVED, [0, 0, int(0.6 * ONE), 0])
    # 0.6 + 0.6 held reach the budget of 1.00: refused, nothing reserved.
    assert results[2] == (REFUSED, [0, 0, int(1.2 * ONE), 0])
    # The first request cost 0.10: its 0.60 went back.
    assert results[3] == (RESERVED, [int(0.1 * ONE), 0, int(0.6 * ONE), 0])
    assert results[4] == (RESERVED, [int(0.3 * ONE), 0, 0, 0])


def test_a_token_quota_holds_tokens(people, key_id):
    acme = people["acme"]
    plans = [plan_for(acme, key_id, tokens=400, quota=1000) for _ in range(5)]

    async def steps():
        results = [await admit(plan) for plan in plans[:4]]
        await settle(plans[0], "0", tokens=50)
        results.append(await admit(plans[4]))
        return results

    results = scenario(steps)
    assert [status for status, _ in results] == [RESERVED] * 3 + [REFUSED, RESERVED]
    assert results[3][1] == [0, 0, 0, 1200]
    assert results[4][1] == [0, 50, 0, 800]


def test_concurrent_admissions_reserve_no_more_than_the_room(people, key_id):
    """Fifty admissions at once: 0.30 each under 1.00 lets exactly four in
    (0, 0.3, 0.6 and 0.9 spent or held before each)."""
    acme = people["acme"]
    plans = [plan_for(acme, key_id, units=int(0.3 * ONE), budget=Decimal(1)) for _ in range(50)]

    async def steps():
        await spend_rebuild(plans[0])
        return await asyncio.gather(*(admit(plan) for plan in plans))

    statuses = [status for status, _ in scenario(steps)]
    assert statuses.count(RESERVED) == 4
    assert statuses.count(REFUSED) == 46


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="holds expire in Redis only")
def test_the_hold_of_a_process_that_died_expires(people, key_id):
    """A hold is a lease: a process that dies stops renewing it, and the
    next admission after its expiry drops it."""
    import redis

    acme = people["acme"]
    dead = plan_for(acme, key_id, units=ONE, budget=Decimal(1))
    later = plan_for(acme, key_id, units=0, budget=Decimal(1))
    assert scenario(lambda: admit(dead))[0] == RESERVED
    redis_conn.leases.drop(f"sy:spend:key:{key_id}:{dead.month}:z", dead.hold_id)
    assert scenario(lambda: admit(later))[0] == REFUSED
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        # The lease's expiry passes (its renewals stopped with the process).
        client.zadd(f"sy:spend:key:{key_id}:{dead.month}:z", {dead.hold_id: time.time() - 1})
        assert scenario(lambda: admit(later)) == (RESERVED, [0, 0, 0, 0])
        assert client.hget(f"sy:spend:key:{key_id}:{dead.month}:h", dead.hold_id) is None
    finally:
        client.close()


def test_a_hold_whose_request_ended_without_giving_it_back_is_kept_no_longer(people, key_id):
    """The backstop for an ending that misses its hold: once the task that
    took it (the request's) has ended, the lease is renewed no more
    (Redis), or the next admission drops it (memory). A hold whose task
    still runs stays."""
    from responses_api.usage.holds import local_holds

    acme = people["acme"]

    async def owned(plan: SpendPlan) -> int:
        owner = asyncio.current_task()
        await spend_rebuild(plan)
        return reserve_result(plan, await reserve(plan, owner), owner)[0]

    def renewed(plan: SpendPlan) -> bool:
        redis_conn.leases._ended()
        return (f"sy:spend:key:{key_id}:{plan.month}:z", plan.hold_id) in redis_conn.leases.held

    left = plan_for(acme, key_id, units=ONE, budget=Decimal(1))
    assert scenario(lambda: owned(left)) == RESERVED
    if redis_conn.enabled():
        assert not renewed(left)
    else:
        later = plan_for(acme, key_id, units=0, budget=Decimal(1))
        assert scenario(lambda: admit(later)) == (RESERVED, [0, 0, 0, 0])
        assert left.hold_id not in local_holds.owners

    kept = plan_for(acme, key_id, units=ONE, budget=Decimal(100))

    async def running() -> bool:
        await owned(kept)
        if redis_conn.enabled():
            alive = renewed(kept)
            redis_conn.leases.drop(f"sy:spend:key:{key_id}:{kept.month}:z", kept.hold_id)
            return alive
        await admit(plan_for(acme, key_id, units=0, budget=Decimal(100)))
        return kept.hold_id in local_holds.owners

    assert scenario(running)


@pytest.fixture
def organisation_counters(people):
    """Acme's and Globex's organisation counters, gone before and after (an
    earlier test database's organisations had the same ids)."""

    def forget():
        from responses_api.usage.spend import local_counters

        for org in (people["acme"], people["globex"]):
            prefix = f"sy:spend:organisation:{org.id}:"
            for name in [k for k in local_counters.counters if k.startswith(prefix)]:
                del local_counters.counters[name]
        if os.environ.get("REDIS_URL"):
            import redis

            client = redis.Redis.from_url(os.environ["REDIS_URL"])
            for org in (people["acme"], people["globex"]):
                for name in client.scan_iter(match=f"sy:spend:organisation:{org.id}:*"):
                    client.delete(name)
            client.close()

    forget()
    yield
    forget()


def org_plan(organisation, key_id: str, *, units: int) -> SpendPlan:
    """A key without a budget of its own in an organisation with 1.00."""
    scopes = (
        SpendScope("key", key_id, None, 10**9),
        SpendScope("organisation", str(organisation.id), Decimal(1), None),
    )
    start = month_start(time.time())
    return SpendPlan(organisation.id, start, scopes, 80, uuid.uuid4().hex, units, 0)


def test_holds_count_for_every_key_of_the_organisation_and_no_other(people, organisation_counters):
    acme, globex = people["acme"], people["globex"]
    first = org_plan(acme, str(uuid.uuid4()), units=ONE)
    other_key = org_plan(acme, str(uuid.uuid4()), units=0)
    other_org = org_plan(globex, str(uuid.uuid4()), units=0)

    async def steps():
        return [await admit(first), await admit(other_key), await admit(other_org)]

    (held, _), (refused, counts), (elsewhere, elsewhere_counts) = scenario(steps)
    assert (held, refused, elsewhere) == (RESERVED, REFUSED, RESERVED)
    # The second key has held nothing itself; its organisation holds 1.00.
    assert counts == [0, 0, 0, 0, 0, 0, ONE, 0]
    assert elsewhere_counts == [0] * 8
    scenario(lambda: settle(first, "0"))
