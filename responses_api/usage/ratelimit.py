"""Rate limits per API key and per organisation (docs/admin/budgets.md).

Three limits, each optional, on the key (``ApiKey.rpm/tpm/concurrency``) and
on the organisation as a whole, all of its keys together
(``Organisation.default_rpm/default_tpm/default_concurrency``):

- requests per minute and tokens per minute, counted in fixed one-minute
  windows (the window's counter resets on the minute);
- concurrent requests, counted as leases that the request holds until it ends.

Tokens are unknown when a request is admitted, so admission counts an
estimate of the input (a quarter of the body's bytes) and must fit in what is
left of the minute; when the request ends, :func:`limits_release` corrects the
window by the difference with the real input + output tokens, in the round
trip that hands the request's usage row over.

All checks and increments of one request are one atomic step: a Lua script
in Redis when ``REDIS_URL`` is set (so every web process shares the counts),
else the same arithmetic on this process's memory (the embedded default runs
one process). A key and organisation without limits costs nothing: no
Redis round trip, no headers.

Refused requests get a 429 with ``Retry-After``; every response of a limited
caller carries OpenAI's ``x-ratelimit-*`` headers for requests and tokens.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from responses_api.access.auth import Caller
from responses_api.protocol.errors import ApiError
from responses_api.runtime import redis_conn

WINDOW = 60


@dataclass(frozen=True, slots=True)
class Scope:
    kind: str  # "key" or "organisation"
    id: str
    rpm: int
    tpm: int
    concurrency: int

    @property
    def base(self) -> str:
        return f"sy:rl:{self.kind}:{self.id}"


@dataclass(slots=True)
class Admission:
    scopes: list[Scope]
    window: int
    estimate: int
    lease_id: str
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    settled: bool = False


def scopes_for(caller: Caller) -> list[Scope]:
    scopes = []
    for kind, id_, rpm, tpm, conc in (
        ("key", caller.key_id, caller.rpm, caller.tpm, caller.concurrency),
        (
            "organisation",
            str(caller.organisation_id),
            caller.org_rpm,
            caller.org_tpm,
            caller.org_concurrency,
        ),
    ):
        if rpm or tpm or conc:
            scopes.append(Scope(kind, id_, rpm or 0, tpm or 0, conc or 0))
    return scopes


def estimate_tokens(body: bytes) -> int:
    """A rough count of the input tokens: about four bytes of JSON per token."""
    return max(len(body) // 4, 1)


def _verdict(
    scopes: list[Scope], used: list[tuple[int, int, int]], estimate: int
) -> tuple[int, str] | None:
    """The first limit this request would exceed: (scope index, kind), or None.

    The reference for the Lua script below (kept in step)."""
    for i, (scope, (requests, tokens, running)) in enumerate(zip(scopes, used, strict=True)):
        if scope.rpm and requests + 1 > scope.rpm:
            return i, "requests"
        if scope.tpm and tokens + estimate > scope.tpm:
            return i, "tokens"
        if scope.concurrency and running + 1 > scope.concurrency:
            return i, "concurrency"
    return None


# KEYS per scope i: requests counter (3i-2), tokens counter (3i-1), leases (3i).
# ARGV: now, lease expiry, lease id, estimate, window seconds, then per scope
# rpm, tpm, concurrency. Returns {verdict scope (0: admitted), kind, used…}.
_ADMIT = """
local now, expiry, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local estimate, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local n = #KEYS / 3
local used = {}
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[3*i], '-inf', now)
  used[i] = {tonumber(redis.call('GET', KEYS[3*i-2]) or '0'),
             tonumber(redis.call('GET', KEYS[3*i-1]) or '0'),
             redis.call('ZCARD', KEYS[3*i])}
end
for i = 1, n do
  local rpm, tpm, conc = tonumber(ARGV[3+3*i]), tonumber(ARGV[4+3*i]), tonumber(ARGV[5+3*i])
  local kind = nil
  if rpm > 0 and used[i][1] + 1 > rpm then kind = 'requests'
  elseif tpm > 0 and used[i][2] + estimate > tpm then kind = 'tokens'
  elseif conc > 0 and used[i][3] + 1 > conc then kind = 'concurrency' end
  if kind then
    local out = {i, kind}
    for j = 1, n do
      table.insert(out, used[j][1]); table.insert(out, used[j][2]); table.insert(out, used[j][3])
    end
    return out
  end
end
local out = {0, ''}
for i = 1, n do
  used[i][1] = redis.call('INCR', KEYS[3*i-2])
  redis.call('EXPIRE', KEYS[3*i-2], window * 2)
  used[i][2] = redis.call('INCRBY', KEYS[3*i-1], estimate)
  redis.call('EXPIRE', KEYS[3*i-1], window * 2)
  if tonumber(ARGV[5+3*i]) > 0 then
    redis.call('ZADD', KEYS[3*i], expiry, lease)
    redis.call('EXPIRE', KEYS[3*i], math.ceil(expiry - now) + 60)
    used[i][3] = used[i][3] + 1
  end
  table.insert(out, used[i][1]); table.insert(out, used[i][2]); table.insert(out, used[i][3])
end
return out
"""


def _keys(scope: Scope, window: int) -> tuple[str, str, str]:
    return (f"{scope.base}:r:{window}", f"{scope.base}:t:{window}", f"{scope.base}:c")


class _Local:
    """Counters of this process (the embedded default)."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.running: dict[str, set[str]] = {}

    def admit(self, scopes: list[Scope], window: int, estimate: int, lease_id: str):
        now_window = window
        for key in [k for k in self.counters if int(k.rsplit(":", 1)[1]) < now_window - 1]:
            del self.counters[key]
        used = []
        for scope in scopes:
            r, t, c = _keys(scope, window)
            used.append(
                (self.counters.get(r, 0), self.counters.get(t, 0), len(self.running.get(c, ())))
            )
        verdict = _verdict(scopes, used, estimate)
        if verdict is not None:
            return verdict, used
        after = []
        for scope, (requests, tokens, running) in zip(scopes, used, strict=True):
            r, t, c = _keys(scope, window)
            self.counters[r] = requests + 1
            self.counters[t] = tokens + estimate
            if scope.concurrency:
                self.running.setdefault(c, set()).add(lease_id)
                running += 1
            after.append((requests + 1, tokens + estimate, running))
        return None, after

    def settle(self, admission: Admission, correction: int) -> None:
        for scope in admission.scopes:
            _, t, c = _keys(scope, admission.window)
            if t in self.counters:
                self.counters[t] = max(self.counters[t] + correction, 0)
            self.running.get(c, set()).discard(admission.lease_id)


_local = _Local()


def admit_script(plan: RatePlan) -> redis_conn.ScriptCall:
    """The admission as one Lua script call, to run alone or in a pipeline."""
    keys: list[str] = []
    args: list[float | int | str] = [
        plan.now,
        redis_conn.leases.expiry(plan.now),
        plan.lease_id,
        plan.estimate,
        WINDOW,
    ]
    for scope in plan.scopes:
        keys.extend(_keys(scope, plan.window))
        args += [scope.rpm, scope.tpm, scope.concurrency]
    return redis_conn.ScriptCall(_ADMIT, keys, args)


def admit_result(plan: RatePlan, result: list[Any]) -> tuple[tuple[int, str] | None, list]:
    """The script's answer as (verdict, counts); an admitted request's
    leases start being renewed."""
    index, kind = int(result[0]), result[1]
    numbers = [int(x) for x in result[2:]]
    used = [tuple(numbers[i : i + 3]) for i in range(0, len(numbers), 3)]
    if index:
        kind = kind.decode() if isinstance(kind, bytes) else kind
        return (index - 1, kind), used
    for scope in plan.scopes:
        if scope.concurrency:
            redis_conn.leases.hold(_keys(scope, plan.window)[2], plan.lease_id)
    return None, used


def _headers(scopes: list[Scope], used, reset: float) -> list[tuple[bytes, bytes]]:
    headers: list[tuple[bytes, bytes]] = []
    reset_text = f"{math.ceil(reset)}s".encode()
    for name, index, field_name in (("requests", 0, "rpm"), ("tokens", 1, "tpm")):
        limited = [
            (getattr(s, field_name), max(getattr(s, field_name) - u[index], 0))
            for s, u in zip(scopes, used, strict=True)
            if getattr(s, field_name)
        ]
        if not limited:
            continue
        # The most constraining limit is the one a client must respect.
        limit, remaining = min(limited, key=lambda pair: pair[1])
        headers += [
            (f"x-ratelimit-limit-{name}".encode(), str(limit).encode()),
            (f"x-ratelimit-remaining-{name}".encode(), str(remaining).encode()),
            (f"x-ratelimit-reset-{name}".encode(), reset_text),
        ]
    return headers


@dataclass(frozen=True, slots=True)
class RatePlan:
    """What admitting one request under its caller's rate limits counts."""

    scopes: list[Scope]
    now: float
    window: int
    estimate: int
    lease_id: str

    @property
    def reset(self) -> float:
        return (self.window + 1) * WINDOW - self.now


def limits_plan(*, caller: Caller, estimate: int) -> RatePlan | None:
    """None when neither the key nor its organisation has rate limits."""
    scopes = scopes_for(caller)
    if not scopes:
        return None
    now = _now()
    return RatePlan(scopes, now, int(now // WINDOW), estimate, uuid.uuid4().hex)


def _now() -> float:
    """The wall clock the windows count on, or the instant a test's server
    stands them still at (``SWITCHYARD_TEST_RATE_LIMIT_NOW``)."""
    frozen = settings.SWITCHYARD_TEST_RATE_LIMIT_NOW
    return time.time() if frozen is None else frozen


def limits_local(plan: RatePlan) -> tuple[tuple[int, str] | None, list]:
    """The admission on this process's counters (no Redis)."""
    return _local.admit(plan.scopes, plan.window, plan.estimate, plan.lease_id)


def limits_outcome(plan: RatePlan, verdict: tuple[int, str] | None, used: list) -> Admission:
    """The admitted request, or the 429 of the first limit it would exceed."""
    scopes, estimate, reset = plan.scopes, plan.estimate, plan.reset
    headers = _headers(scopes, used, reset)
    if verdict is not None:
        index, kind = verdict
        scope = scopes[index]
        retry = 1 if kind == "concurrency" else max(math.ceil(reset), 1)
        limit = {"requests": scope.rpm, "tokens": scope.tpm, "concurrency": scope.concurrency}[kind]
        what = {
            "requests": f"{limit} requests per minute",
            "tokens": f"{limit} tokens per minute",
            "concurrency": f"{limit} concurrent requests",
        }[kind]
        if kind == "tokens" and estimate > scope.tpm:
            message = (
                f"This request (about {estimate} input tokens) is larger than the "
                f"{scope.kind}'s limit of {what}."
            )
        else:
            message = f"Rate limit reached for this {scope.kind}: {what}. Retry in {retry} s."
        raise ApiError(
            429,
            message,
            code="rate_limit_exceeded",
            headers=[(b"retry-after", str(retry).encode()), *headers],
        )
    return Admission(scopes, plan.window, estimate, plan.lease_id, headers)


async def limits_admit(*, caller: Caller, estimate: int) -> Admission | None:
    """Count this request against the caller's limits, or raise a 429.

    Returns None when neither the key nor its organisation has limits."""
    plan = limits_plan(caller=caller, estimate=estimate)
    if plan is None:
        return None
    if redis_conn.enabled():
        verdict, used = admit_result(plan, await redis_conn.run_call(admit_script(plan)))
    else:
        verdict, used = limits_local(plan)
    return limits_outcome(plan, verdict, used)


def limits_release(*, admission: Admission, tokens: int) -> redis_conn.Release | None:
    """Release the concurrency lease and put the real token count in the
    window: applied now without Redis (None); with Redis, the commands to
    send in a round trip the request makes anyway (its usage row's).
    Settles once: None the second time."""
    if admission.settled:
        return None
    admission.settled = True
    correction = tokens - admission.estimate
    if not redis_conn.enabled():
        _local.settle(admission, correction)
        return None
    commands: list[tuple[Any, ...]] = []
    for scope in admission.scopes:
        _, t, c = _keys(scope, admission.window)
        if correction and scope.tpm:
            commands += [("INCRBY", t, correction), ("EXPIRE", t, WINDOW * 2)]
        if scope.concurrency:
            redis_conn.leases.drop(c, admission.lease_id)
            commands.append(("ZREM", c, admission.lease_id))
    return redis_conn.Release(commands)


async def limits_settle(*, admission: Admission, tokens: int) -> None:
    """:func:`limits_release` on a round trip of its own."""
    release = limits_release(admission=admission, tokens=tokens)
    if release is not None:
        await redis_conn.run_releases([release])
