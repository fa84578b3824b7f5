"""Monthly spend limits per API key and per organisation.

Each limit is optional: a budget in the currency of the model prices and a
quota of tokens (input + output), per calendar month in UTC. A request is
refused (429 ``insufficient_quota``) when what was spent before it started
has reached a limit; past ``budget_warning_percent`` of a limit, responses
carry the notice ``budget_near_limit``.

What was spent lives in counters, one for the cost (in units of 10⁻⁸, the
usage row's precision, so sums are exact integers) and one for the tokens,
per scope and month: in Redis when ``REDIS_URL`` is set (every web process
reads the same ones), else in this process's memory (the embedded default
runs one process). Every usage row adds its cost and tokens when it is
submitted, in the round trip that hands the row over
(:func:`spend_settle`). A counter that does not exist (a new month, a Redis
that lost it, a restarted process) is rebuilt from the month's usage rows
(:func:`responses_api.usage.monthly.month_spent`); increments skip a missing
counter, so a rebuild never starts from a partial count. A row submitted
but not yet written when a counter is rebuilt (at most a fraction of a
second of traffic) is the one thing a rebuild can miss.

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

    def counter_keys(self, month: str) -> tuple[str, str]:
        base = f"sy:spend:{self.kind}:{self.id}:{month}"
        return base + ":c", base + ":t"


@dataclass(frozen=True, slots=True)
class SpendPlan:
    """The spend limits one request is admitted under, in its month."""

    organisation_id: int
    start: datetime  # the month's first instant
    scopes: tuple[SpendScope, ...]
    warning_percent: int

    @property
    def month(self) -> str:
        return f"{self.start:%Y%m}"

    def keys(self) -> list[str]:
        return [key for scope in self.scopes for key in scope.counter_keys(self.month)]


def spend_plan(*, caller: Caller, created_at: float) -> SpendPlan | None:
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
    return SpendPlan(caller.organisation_id, start, tuple(scopes), caller.budget_warning_percent)


# --- counters ------------------------------------------------------------------


def _number(value: Any) -> int | None:
    return None if value is None else int(value)


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


_local = _Local()


def spend_local(plan: SpendPlan) -> list[int | None]:
    return _local.read(plan.keys())


def read_command(plan: SpendPlan) -> tuple[Any, ...]:
    """The counters' read, to send in the admission's round trip."""
    return ("MGET", *plan.keys())


def read_result(values: list[Any]) -> list[int | None]:
    return [_number(v) for v in values]


async def spend_counts(plan: SpendPlan, values: list[int | None]) -> list[int]:
    """The counters' values, rebuilding those that are missing from the
    usage rows. A rebuild creates a counter only if nobody did meanwhile,
    then reads what is there."""
    if None not in values:
        return values  # type: ignore[return-value]
    missing = {}
    keys = plan.keys()
    for i, scope in enumerate(plan.scopes):
        cost_key, tokens_key = keys[2 * i], keys[2 * i + 1]
        if values[2 * i] is None or values[2 * i + 1] is None:
            key_id = scope.id if scope.kind == "key" else None
            cost, tokens = await sync_to_async(month_spent)(
                plan.organisation_id, key_id, month=plan.start
            )
            missing[cost_key] = int(cost * COST_UNITS)
            missing[tokens_key] = tokens
    if not redis_conn.enabled():
        _local.create(missing)
        return [v if v is not None else 0 for v in _local.read(keys)]
    expires = int(next_month(plan.start).timestamp()) + KEEP_AFTER_MONTH
    commands = [("SET", key, value, "NX", "EXAT", expires) for key, value in missing.items()]
    _, results = await redis_conn.run_batch([*commands, read_command(plan)])
    return [v if v is not None else 0 for v in read_result(results[-1])]


# An increment skips a counter that does not exist: it is rebuilt from the
# rows (which hold this increment's row too) when next read.
_ADD = """
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBY', KEYS[i], ARGV[i]) end
end
return 0
"""


def spend_settle(plan: SpendPlan, row: dict[str, Any]) -> list[redis_conn.ScriptCall]:
    """Add a usage row's cost and tokens to its month's counters: applied at
    once without Redis; with Redis, the script to send with the row."""
    units = int(Decimal(row.get("cost") or 0) * COST_UNITS)
    tokens = int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0)
    if not units and not tokens:
        return []
    keys = plan.keys()
    amounts = [units, tokens] * len(plan.scopes)
    if not redis_conn.enabled():
        _local.add(dict(zip(keys, amounts, strict=True)))
        return []
    return [redis_conn.ScriptCall(_ADD, keys, amounts)]


# --- verdict -------------------------------------------------------------------


def money(value: Decimal) -> str:
    """An amount as people read it: cents at least, more digits when it has them."""
    cents = value.quantize(Decimal("0.01"))
    return f"{cents if cents == value else value.normalize():f}"


def _amount(units: int) -> str:
    return money(Decimal(units) / COST_UNITS)


def spend_outcome(plan: SpendPlan, counts: list[int]) -> list[tuple[str, str]]:
    """Raise the 429 of the first limit already reached (the key's before the
    organisation's, a budget before a quota); else the notices to add."""
    resets = f"{next_month(plan.start):%Y-%m-%d}"
    nearest: tuple[float, str] | None = None
    for i, scope in enumerate(plan.scopes):
        units, tokens = counts[2 * i], counts[2 * i + 1]
        name = _NAMES[scope.kind]
        limits = []
        if scope.budget is not None:
            limit = int(scope.budget * COST_UNITS)
            limits.append((units, limit, "budget", f"{_amount(units)} of {_amount(limit)}"))
        if scope.tokens is not None:
            figures = f"{tokens} of {scope.tokens} tokens"
            limits.append((tokens, scope.tokens, "token quota", figures))
        for used, limit, what, figures in limits:
            if used >= limit:
                raise over_limit(
                    f"This {name} has reached its monthly {what} ({figures} used this "
                    f"month, UTC). It resets on {resets}; an admin can raise it in the console."
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
