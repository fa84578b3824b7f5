"""Monthly spend limits per API key and per organisation.

Each limit is optional: a budget in the currency of the model prices and a
quota of tokens (input + output), per calendar month in UTC. A request is
refused (429 ``insufficient_quota``) when what was spent before it started,
with what the requests still in progress hold, has reached a limit; past
``budget_warning_percent`` of a limit, responses carry the notice
``budget_near_limit``.

What was spent lives in counters, one for the cost (in units of 10⁻⁸, the
usage row's precision, so sums are exact integers) and one for the tokens,
per scope and month: in Redis when ``REDIS_URL`` is set (every web process
reads the same ones), else in this process's memory (the embedded default
runs one process). A counter that does not exist (a new month, a Redis that
lost it, a restarted process) is rebuilt from the month's usage rows
(:func:`responses_api.usage.monthly.month_spent`); increments skip a missing
counter, so a rebuild never starts from a partial count. A row submitted
but not yet written when a counter is rebuilt (at most a fraction of a
second of traffic) is the one thing a rebuild can miss.

Admission reserves the request's worst case (``responses_api.usage.holds``)
in the same atomic step as the check, so requests admitted together, in any
number of web processes, cannot all see the same room under a limit; the
usage row settles the reservation to what the request really cost
(``holds.spend_settle``), in the round trip that hands the row over.

A caller with no spend limit costs nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from responses_api.protocol.errors import ApiError
from responses_api.runtime import redis_conn
from responses_api.usage.monthly import month_spent, month_start, next_month

if TYPE_CHECKING:
    from responses_api.access.auth import Caller

# Counters hold cost in units of 10⁻⁸ (UsageLog.cost has 8 decimal places).
COST_UNITS = 10**8
# A month's counters outlive it by this much, then Redis drops them.
KEEP_AFTER_MONTH = 7 * 86400
NEAR_LIMIT = "budget_near_limit"
QUOTA_CODE = "insufficient_quota"

_NAMES = {"key": "API key", "organisation": "organisation"}


@dataclass(frozen=True, slots=True)
class SpendScope:
    kind: str  # "key" or "organisation"
    id: str
    budget: Decimal | None
    tokens: int | None

    def base(self, month: str) -> str:
        return f"sy:spend:{self.kind}:{self.id}:{month}"

    def counter_keys(self, month: str) -> tuple[str, str]:
        base = self.base(month)
        return base + ":c", base + ":t"

    def limits(self) -> tuple[int, int]:
        """The budget in counter units and the quota; -1 for none."""
        budget = -1 if self.budget is None else int(self.budget * COST_UNITS)
        return budget, -1 if self.tokens is None else self.tokens


@dataclass(frozen=True, slots=True)
class SpendPlan:
    """The spend limits one request is admitted under, in its month, and
    what it reserves under them until its row settles: its worst-case cost
    (in counter units) and tokens."""

    organisation_id: int
    start: datetime  # the month's first instant
    scopes: tuple[SpendScope, ...]
    warning_percent: int
    hold_id: str = ""
    units: int = 0
    tokens: int = 0

    @property
    def month(self) -> str:
        return f"{self.start:%Y%m}"

    def keys(self) -> list[str]:
        return [key for scope in self.scopes for key in scope.counter_keys(self.month)]

    def expires(self) -> int:
        """When Redis drops the month's counters (a Unix time)."""
        return int(next_month(self.start).timestamp()) + KEEP_AFTER_MONTH


def spend_plan(
    *, caller: Caller, created_at: float, hold_id: str = "", units: int = 0, tokens: int = 0
) -> SpendPlan | None:
    """None when neither the key nor its organisation has a spend limit."""
    scopes = []
    if caller.monthly_budget is not None or caller.monthly_tokens is not None:
        key = SpendScope("key", caller.key_id, caller.monthly_budget, caller.monthly_tokens)
        scopes.append(key)
    if caller.org_monthly_budget is not None or caller.org_monthly_tokens is not None:
        scopes.append(
            SpendScope(
                "organisation",
                str(caller.organisation_id),
                caller.org_monthly_budget,
                caller.org_monthly_tokens,
            )
        )
    if not scopes:
        return None
    start = month_start(created_at)
    return SpendPlan(
        caller.organisation_id,
        start,
        tuple(scopes),
        caller.budget_warning_percent,
        hold_id,
        units,
        tokens,
    )


def worst_case(price: Any, *, input_tokens: int, output_tokens: int) -> tuple[int, int]:
    """What a request may cost at most (counter units, rounded up) and the
    tokens it may use, priced by ``price`` (a model's ``cost``)."""
    cost = price(input_tokens, 0, output_tokens)
    return -int(-cost * COST_UNITS // 1), input_tokens + output_tokens


# --- rebuilding counters from the rows -----------------------------------------


class _Local:
    """Counters of this process (the embedded default)."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}

    def read(self, keys: list[str]) -> list[int | None]:
        return [self.counters.get(key) for key in keys]

    def create(self, values: dict[str, int]) -> None:
        # A rebuild is rare (once per scope and month): the time to let
        # counters of months other than the one being rebuilt go.
        months = {key.rsplit(":", 2)[1] for key in values}
        for key in [k for k in self.counters if k.rsplit(":", 2)[1] not in months]:
            del self.counters[key]
        for key, value in values.items():
            self.counters.setdefault(key, value)

    def add(self, amounts: dict[str, int]) -> None:
        for key, amount in amounts.items():
            if key in self.counters:
                self.counters[key] += amount


local_counters = _Local()


async def spend_rebuild(plan: SpendPlan) -> None:
    """Create the plan's missing counters from the usage rows. A counter
    is created only if nobody did meanwhile."""
    keys = plan.keys()
    if redis_conn.enabled():
        _, (present,) = await redis_conn.run_batch([("MGET", *keys)])
    else:
        present = local_counters.read(keys)
    missing = {}
    for i, scope in enumerate(plan.scopes):
        if present[2 * i] is None or present[2 * i + 1] is None:
            key_id = scope.id if scope.kind == "key" else None
            cost, tokens = await sync_to_async(month_spent)(
                plan.organisation_id, key_id, month=plan.start
            )
            missing[keys[2 * i]] = int(cost * COST_UNITS)
            missing[keys[2 * i + 1]] = tokens
    if not missing:
        return
    if not redis_conn.enabled():
        local_counters.create(missing)
        return
    expires = plan.expires()
    await redis_conn.run_batch(
        [("SET", key, value, "NX", "EXAT", expires) for key, value in missing.items()]
    )


# --- verdict -------------------------------------------------------------------


def money(value: Decimal) -> str:
    """An amount as people read it: cents at least, more digits when it has them."""
    cents = value.quantize(Decimal("0.01"))
    return f"{cents if cents == value else value.normalize():f}"


def _amount(units: int) -> str:
    return money(Decimal(units) / COST_UNITS)


def spend_outcome(plan: SpendPlan, counts: list[int]) -> list[tuple[str, str]]:
    """Raise the 429 of the first limit already reached (the key's before the
    organisation's, a budget before a quota); else the notices to add.

    ``counts`` holds, per scope, the cost and tokens spent, then the cost
    and tokens held by requests in progress. A limit is reached when the
    two together reach it; the notice speaks of what was spent."""
    resets = f"{next_month(plan.start):%Y-%m-%d}"
    nearest: tuple[float, str] | None = None
    for i, scope in enumerate(plan.scopes):
        units, tokens, held_units, held_tokens = counts[4 * i : 4 * i + 4]
        name = _NAMES[scope.kind]
        limits = []
        if scope.budget is not None:
            limit = int(scope.budget * COST_UNITS)
            held = f"; {_amount(held_units)} held by requests in progress" if held_units else ""
            figures = f"{_amount(units)} of {_amount(limit)}"
            limits.append((units, held_units, limit, "budget", figures, held))
        if scope.tokens is not None:
            figures = f"{tokens} of {scope.tokens} tokens"
            held = f"; {held_tokens} held by requests in progress" if held_tokens else ""
            limits.append((tokens, held_tokens, scope.tokens, "token quota", figures, held))
        for used, held_amount, limit, what, figures, held in limits:
            if used + held_amount >= limit:
                raise over_limit(
                    f"This {name} has reached its monthly {what} ({figures} used this "
                    f"month, UTC{held}). It resets on {resets}; an admin can raise it in "
                    "the console."
                )
            share = 100 * used / limit
            if share >= plan.warning_percent and (nearest is None or share > nearest[0]):
                nearest = (
                    share,
                    f"This {name} has used {int(share)}% of its monthly {what} ({figures}).",
                )
    return [] if nearest is None else [(NEAR_LIMIT, nearest[1])]


def over_limit(message: str) -> ApiError:
    # No Retry-After: nothing changes before the month ends. The OpenAI SDKs
    # retry any 429 unless told not to.
    return ApiError(
        429, message, code=QUOTA_CODE, type=QUOTA_CODE, headers=[(b"x-should-retry", b"false")]
    )
