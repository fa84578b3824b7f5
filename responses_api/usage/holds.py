"""Reservations under the monthly spend limits (``responses_api.usage.spend``).

A budget checked against what was spent only would let every request
admitted before the first of them ends see the same room: with many web
processes, a whole burst gets through past the limit. So admission checks
and reserves in one atomic step: the request holds its worst case (its
estimated input and its output limit at the model's prices, and those
tokens), the next request is checked against what was spent plus what is
held, and the usage row gives the hold back while it adds what the request
really cost. Requests admitted together then overspend a limit by at most
the hold of the last one admitted.

In Redis (``REDIS_URL``), per scope and month, a hash holds each request's
hold (``units:tokens``) and their totals (fields ``_u`` and ``_t``), and a
sorted set the holds' expiries, renewed while their request runs
(``redis_conn.leases``): a process that dies gives its holds back within the
lease time, the next admission dropping them. Without Redis the same
arithmetic runs on this process's memory.

A hold lives no longer than its request: every ending gives it back
(``Exchange.drop_hold`` when no row settled it), and as a backstop it is
renewed only while the task serving its request runs, and for at most
``MAX_HOLD_SECONDS``; in memory it is dropped on the same terms by the next
admission. An ending that missed it (a bug) then costs a lease time, not
the room of the budget for the life of the process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from decimal import Decimal
from typing import Any

from responses_api.runtime import redis_conn
from responses_api.usage.spend import COST_UNITS, SpendPlan, local_counters

REFUSED, RESERVED, MISSING = 0, 1, -1

# The longest a hold is kept, in seconds: a day, the longest first-token
# deadline a model may have (``served_models.MAX_FIRST_TOKEN_TIMEOUT``). A
# request running longer loses only its hold; its row still counts its cost.
MAX_HOLD_SECONDS = 86_400.0

# KEYS per scope i: cost counter (4i-3), tokens counter (4i-2), holds hash
# (4i-1), holds' expiries (4i). ARGV: now, expiry, hold id, units, tokens,
# keys' expiry (Unix time), then per scope its budget and quota (-1: none).
# Returns {MISSING} when a counter is missing (nothing reserved), else
# {RESERVED or REFUSED, then per scope spent units, spent tokens, held
# units, held tokens (before this hold)}. The hold is added to one of the same
# id (a tool loop's next backend call holds under its request's id).
_RESERVE = """
local now, expiry, id, exat = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[6]
local n = #KEYS / 4
for i = 1, n do
  if redis.call('EXISTS', KEYS[4*i-3], KEYS[4*i-2]) < 2 then return {-1} end
end
local out, admit = {1}, true
for i = 1, n do
  local h, z = KEYS[4*i-1], KEYS[4*i]
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', z, '-inf', now)) do
    local held = redis.call('HGET', h, gone)
    if held then
      local u, t = string.match(held, '^(%d+):(%d+)$')
      if u ~= '0' then redis.call('HINCRBY', h, '_u', '-' .. u) end
      if t ~= '0' then redis.call('HINCRBY', h, '_t', '-' .. t) end
      redis.call('HDEL', h, gone)
    end
  end
  redis.call('ZREMRANGEBYSCORE', z, '-inf', now)
  local spent_u, spent_t = redis.call('GET', KEYS[4*i-3]), redis.call('GET', KEYS[4*i-2])
  local held_u = redis.call('HGET', h, '_u') or '0'
  local held_t = redis.call('HGET', h, '_t') or '0'
  local budget, quota = tonumber(ARGV[5+2*i]), tonumber(ARGV[6+2*i])
  if (budget >= 0 and tonumber(spent_u) + tonumber(held_u) >= budget)
      or (quota >= 0 and tonumber(spent_t) + tonumber(held_t) >= quota) then
    admit = false
  end
  table.insert(out, spent_u); table.insert(out, spent_t)
  table.insert(out, held_u); table.insert(out, held_t)
end
if not admit then out[1] = 0; return out end
for i = 1, n do
  local h, z = KEYS[4*i-1], KEYS[4*i]
  local u, t = 0, 0
  local held = redis.call('HGET', h, id)
  if held then
    local hu, ht = string.match(held, '^(%d+):(%d+)$')
    u, t = tonumber(hu), tonumber(ht)
  end
  redis.call('HSET', h, id, (u + tonumber(ARGV[4])) .. ':' .. (t + tonumber(ARGV[5])))
  redis.call('HINCRBY', h, '_u', ARGV[4])
  redis.call('HINCRBY', h, '_t', ARGV[5])
  redis.call('ZADD', z, expiry, id)
  redis.call('EXPIREAT', h, exat)
  redis.call('EXPIREAT', z, exat)
end
return out
"""

# KEYS as above; ARGV: hold id, units, tokens. Gives the hold back and adds
# the row's cost and tokens to the counters; an increment skips a counter
# that does not exist (it is rebuilt from the rows, this one included).
_SETTLE = """
local id = ARGV[1]
for i = 1, #KEYS / 4 do
  local h = KEYS[4*i-1]
  local held = redis.call('HGET', h, id)
  if held then
    local u, t = string.match(held, '^(%d+):(%d+)$')
    if u ~= '0' then redis.call('HINCRBY', h, '_u', '-' .. u) end
    if t ~= '0' then redis.call('HINCRBY', h, '_t', '-' .. t) end
    redis.call('HDEL', h, id)
  end
  redis.call('ZREM', KEYS[4*i], id)
  if redis.call('EXISTS', KEYS[4*i-3]) == 1 then redis.call('INCRBY', KEYS[4*i-3], ARGV[2]) end
  if redis.call('EXISTS', KEYS[4*i-2]) == 1 then redis.call('INCRBY', KEYS[4*i-2], ARGV[3]) end
end
return 0
"""


def _keys(plan: SpendPlan) -> list[str]:
    keys = []
    for scope in plan.scopes:
        base = scope.base(plan.month)
        keys += [base + ":c", base + ":t", base + ":h", base + ":z"]
    return keys


class _Holds:
    """The holds of this process's requests (the embedded default), per
    scope and month: hold id → (units, tokens)."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, tuple[int, int]]] = {}
        # Per hold id: the task serving its request, and when it is kept no longer.
        self.owners: dict[str, tuple[asyncio.Future[Any] | None, float]] = {}

    def reserve(self, plan: SpendPlan, owner: asyncio.Future[Any] | None = None) -> list[int]:
        self._ended()
        values = local_counters.read(plan.keys())
        if None in values:
            return [MISSING]
        out, admit = [RESERVED], True
        for i, scope in enumerate(plan.scopes):
            spent_units, spent_tokens = values[2 * i], values[2 * i + 1]
            assert spent_units is not None and spent_tokens is not None
            held = self.held.get(scope.base(plan.month), {}).values()
            held_units, held_tokens = sum(h[0] for h in held), sum(h[1] for h in held)
            budget, quota = scope.limits()
            if (budget >= 0 and spent_units + held_units >= budget) or (
                quota >= 0 and spent_tokens + held_tokens >= quota
            ):
                admit = False
            out += [spent_units, spent_tokens, held_units, held_tokens]
        if not admit:
            out[0] = REFUSED
            return out
        for scope in plan.scopes:
            holds = self.held.setdefault(scope.base(plan.month), {})
            units, tokens = holds.get(plan.hold_id, (0, 0))
            holds[plan.hold_id] = (units + plan.units, tokens + plan.tokens)
        if plan.hold_id not in self.owners:  # else grown, by the request that holds it
            self.owners[plan.hold_id] = (owner, time.monotonic() + MAX_HOLD_SECONDS)
        return out

    def _ended(self) -> None:
        """Drop the holds whose request's task ended, or whose time is up,
        without their row settling them (as Redis drops expired ones)."""
        now = time.monotonic()
        gone = {
            hold_id
            for hold_id, (owner, until) in list(self.owners.items())
            if (owner is not None and owner.done()) or now >= until
        }
        if not gone:
            return
        for base, holds in list(self.held.items()):
            for hold_id in gone.intersection(holds):
                del holds[hold_id]
            if not holds:
                self.held.pop(base, None)
        for hold_id in gone:
            self.owners.pop(hold_id, None)

    def settle(self, plan: SpendPlan, units: int, tokens: int) -> None:
        self.owners.pop(plan.hold_id, None)
        for scope in plan.scopes:
            base = scope.base(plan.month)
            holds = self.held.get(base)
            if holds is not None:
                holds.pop(plan.hold_id, None)
                if not holds:
                    del self.held[base]
            cost_key, tokens_key = scope.counter_keys(plan.month)
            local_counters.add({cost_key: units, tokens_key: tokens})


local_holds = _Holds()


def reserve_call(plan: SpendPlan) -> redis_conn.ScriptCall:
    """The check and the hold as one script call, to run alone or in the
    admission's pipeline; ``plan``'s amounts are added to a hold of its id
    (held already by the same request)."""
    now = time.time()
    args: list[Any] = [
        now,
        redis_conn.leases.expiry(now),
        plan.hold_id,
        plan.units,
        plan.tokens,
        plan.expires(),
    ]
    for scope in plan.scopes:
        args += scope.limits()
    return redis_conn.ScriptCall(_RESERVE, _keys(plan), args)


def reserve_result(
    plan: SpendPlan, result: list[Any], owner: asyncio.Future[Any] | None = None
) -> tuple[int, list[int]]:
    """The reservation's answer (from Redis or :func:`reserve_local`):
    (RESERVED, REFUSED or MISSING, the counts per scope). A hold starts
    being renewed, while ``owner`` (the task serving its request) runs."""
    status = int(result[0])
    if status == RESERVED and redis_conn.enabled():
        keys = _keys(plan)
        for i in range(len(plan.scopes)):
            redis_conn.leases.hold(
                keys[4 * i + 3], plan.hold_id, owner=owner, at_most=MAX_HOLD_SECONDS
            )
    return status, [int(v) for v in result[1:]]


async def reserve(plan: SpendPlan, owner: asyncio.Future[Any] | None = None) -> list[Any]:
    """The reservation on a round trip of its own (after a rebuild, or a
    hold grown for a tool loop's next backend call)."""
    if not redis_conn.enabled():
        return local_holds.reserve(plan, owner)
    return await redis_conn.run_call(reserve_call(plan))


def reserve_local(plan: SpendPlan, owner: asyncio.Future[Any] | None = None) -> list[int]:
    return local_holds.reserve(plan, owner)


def spend_settle(plan: SpendPlan, row: dict[str, Any]) -> list[redis_conn.ScriptCall]:
    """Give the request's hold back and add its row's cost and tokens to the
    month's counters: at once without Redis; with Redis, the script to send
    with the row. The hold stops being renewed now: if the script never
    runs, it expires."""
    units = int(Decimal(row.get("cost") or 0) * COST_UNITS)
    tokens = int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0)
    if row.get("is_check"):
        units = tokens = 0  # a model check spends nothing of the organisation's
    if not redis_conn.enabled():
        local_holds.settle(plan, units, tokens)
        return []
    keys = _keys(plan)
    for i in range(len(plan.scopes)):
        redis_conn.leases.drop(keys[4 * i + 3], plan.hold_id)
    return [redis_conn.ScriptCall(_SETTLE, keys, [plan.hold_id, units, tokens])]


async def spend_release(plan: SpendPlan | None) -> None:
    """Give back a hold that no row settled (its request ended without
    handing one over), counting nothing. Redis away, it expires as the
    leases of a dead process do: it is no longer renewed."""
    if plan is None:
        return
    settle = spend_settle(plan, {})
    try:
        if settle:
            await asyncio.shield(redis_conn.run_batch((), settle))
    except Exception:
        logging.getLogger(__name__).warning("a spend hold could not be given back", exc_info=True)
