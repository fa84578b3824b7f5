"""Where the routing's shared state lives: in the process, or in Redis.

In-flight counts, suspect marks, conversation affinity, the backends'
polled signals and their prefix indexes (``prefix_index``), behind one
interface with two keepers: :class:`LocalState` for the embedded default (one
process) and :class:`RedisState` for every web process at once. The router
(``backends/routing.py``) picks one per call and never sees the difference;
the choice of a backend is :func:`choose`, which the Lua script of
:class:`RedisState` repeats so that the choice and the claim of a slot are one
step in Redis.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.conf import settings

from responses_api.backends.prefix_index import (
    LocalPrefixIndex,
    PromptBlocks,
    found_in_redis,
    lookup_command,
)
from responses_api.backends.scoring import NO_SIGNALS, Observed, Signals
from responses_api.catalogue.catalog import Route
from responses_api.runtime import redis_conn

SUSPECT_SECONDS = 10.0
# Scores this close are equal (what floating point leaves of equal terms).
TIE = 1e-9
# A backend's polled signals outlive two health checks (every 15 s), then
# count as none: a check that stopped must not leave a backend looking busy.
SIGNALS_SECONDS = 45.0
AFFINITY_SECONDS = 3600
AFFINITY_ENTRIES = 50_000


class Terms(NamedTuple):
    """Per candidate, what its score is without its in-flight requests, and
    what each of them takes off it (``scoring.terms``): the claim adds the
    counts it reads, so that requests choosing at the same time see each
    other's slots."""

    bonus: Sequence[float]
    per_request: Sequence[float]


def choose(
    counts: Sequence[int],
    limits: Sequence[int],
    healthy: Sequence[bool],
    terms: Terms | None,
    rand: int,
) -> int | None:
    """Index of the backend to use, or None when all are full.

    The reference for the Lua script in :class:`RedisState` (kept in step):
    suspect backends count only when no healthy one is left; among the
    backends with a free slot the best score wins, ``bonus − per_request ×
    in-flight`` (without ``terms``: the least loaded), ties broken by
    ``rand`` so that idle backends share the load.
    """
    any_healthy = any(healthy)

    def free(i: int) -> bool:
        return (healthy[i] or not any_healthy) and (not limits[i] or counts[i] < limits[i])

    def score(i: int) -> float:
        if terms is None:
            return -counts[i]
        return terms.bonus[i] - terms.per_request[i] * counts[i]

    candidates = [i for i in range(len(counts)) if free(i)]
    if not candidates:
        return None
    best = max(score(i) for i in candidates)
    ties = [i for i in candidates if score(i) >= best - TIE]
    return ties[rand % len(ties)]


class LocalState:
    """Routing state of one process (the embedded default)."""

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.suspect_until: dict[str, float] = {}
        self.affinity: OrderedDict[str, str] = OrderedDict()
        self.prefixes = LocalPrefixIndex()
        # Per backend, its last polled signals and until when they hold.
        self.signals: dict[str, tuple[Signals, float]] = {}
        # Per backend, when requests were placed on it lately.
        self.recent: dict[str, deque[float]] = {}

    async def observe(
        self, routes: Sequence[Route], affinity: str | None, blocks: PromptBlocks | None
    ) -> Observed:
        now = time.monotonic()
        ids = [r.backend.id for r in routes]
        signals = [self.signals.get(i, (NO_SIGNALS, 0.0)) for i in ids]
        return Observed(
            counts=[self.in_flight.get(i, 0) for i in ids],
            signals=[held if until > now else NO_SIGNALS for held, until in signals],
            blocks=[self.prefixes.found(blocks, i) if blocks else 0 for i in ids],
            holder=self.affinity.get(affinity) if affinity else None,
            recent=[self._recent(i, now) for i in ids],
        )

    def _recent(self, backend_id: str, now: float) -> int:
        times = self.recent.get(backend_id)
        if not times:
            return 0
        oldest = now - settings.SWITCHYARD_ROUTING["recent_seconds"]
        while times and times[0] < oldest:
            times.popleft()
        return len(times)

    async def claim(self, routes: Sequence[Route], terms: Terms | None, lease_id: str):
        ids = [r.backend.id for r in routes]
        now = time.monotonic()
        index = choose(
            [self.in_flight.get(i, 0) for i in ids],
            [r.backend.max_concurrency for r in routes],
            [self.suspect_until.get(i, 0.0) <= now for i in ids],
            terms,
            random.getrandbits(30),
        )
        if index is not None:
            self.in_flight[ids[index]] = self.in_flight.get(ids[index], 0) + 1
        return index

    async def release(self, backend_id: str, lease_id: str) -> None:
        self.release_now(backend_id)

    def release_now(self, backend_id: str) -> None:
        self.in_flight[backend_id] = max(self.in_flight.get(backend_id, 1) - 1, 0)

    async def mark_suspect(self, backend_id: str) -> None:
        self.suspect_until[backend_id] = time.monotonic() + SUSPECT_SECONDS

    async def is_suspect(self, backend_id: str) -> bool:
        return self.suspect_until.get(backend_id, 0.0) > time.monotonic()

    async def remembered(self, key: str) -> str | None:
        return self.affinity.get(key)

    async def remember(self, key: str, backend_id: str) -> None:
        self.affinity[key] = backend_id
        self.affinity.move_to_end(key)
        while len(self.affinity) > AFFINITY_ENTRIES:
            self.affinity.popitem(last=False)

    def placed(self, blocks: PromptBlocks, backend_id: str) -> None:
        self.prefixes.record(blocks, backend_id)
        self.recent.setdefault(backend_id, deque()).append(time.monotonic())

    def signalled(self, backend_id: str, signals: Signals | None) -> None:
        if signals is None:
            self.signals.pop(backend_id, None)
        else:
            self.signals[backend_id] = (signals, time.monotonic() + SIGNALS_SECONDS)

    async def load(self, backend_id: str) -> int:
        return self.in_flight.get(backend_id, 0)


# KEYS: per candidate i, its in-flight set (2i-1) and its suspect mark (2i).
# ARGV: now, lease expiry, lease id, rand, whether scored (0: least loaded),
# then per candidate its limit, bonus and per-request weight.
_CLAIM = """
local now, expiry, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local rand, scored = tonumber(ARGV[4]), tonumber(ARGV[5]) == 1
local n = #KEYS / 2
local counts, healthy, any_healthy = {}, {}, false
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[2*i-1], '-inf', now)
  counts[i] = redis.call('ZCARD', KEYS[2*i-1])
  healthy[i] = redis.call('EXISTS', KEYS[2*i]) == 0
  if healthy[i] then any_healthy = true end
end
local function free(i)
  local limit = tonumber(ARGV[3 + 3*i])
  return (healthy[i] or not any_healthy) and (limit == 0 or counts[i] < limit)
end
local function score(i)
  if not scored then return -counts[i] end
  return tonumber(ARGV[4 + 3*i]) - tonumber(ARGV[5 + 3*i]) * counts[i]
end
local best, ties = nil, {}
for i = 1, n do
  if free(i) then
    local s = score(i)
    if best == nil or s > best + TIE then
      best, ties = s, {i}
    elseif s >= best - TIE then
      table.insert(ties, i)
    end
  end
end
local choice = 0
if #ties > 0 then choice = ties[(rand % #ties) + 1] end
if choice > 0 then
  redis.call('ZADD', KEYS[2*choice-1], expiry, lease)
  redis.call('EXPIRE', KEYS[2*choice-1], math.ceil(expiry - now) + 60)
end
return choice
""".replace("TIE", "1e-9")


def inflight_key(backend_id: str) -> str:
    return f"sy:backend:{backend_id}:inflight"


def suspect_key(backend_id: str) -> str:
    return f"sy:backend:{backend_id}:suspect"


def signals_key(backend_id: str) -> str:
    return f"sy:backend:{backend_id}:signals"


def recent_key(backend_id: str) -> str:
    return f"sy:backend:{backend_id}:recent"


def recent_commands(backend_id: str, member: str, now: float) -> list[tuple[Any, ...]]:
    """The Redis commands counting a request placed on the backend now."""
    window = settings.SWITCHYARD_ROUTING["recent_seconds"]
    key = recent_key(backend_id)
    return [
        ("ZADD", key, now, member),
        ("ZREMRANGEBYSCORE", key, "-inf", now - window),
        ("EXPIRE", key, int(window) + 5),
    ]


def _affinity_key(key: str) -> str:
    return f"sy:affinity:{key}"


def _signals(values: Sequence[Any] | None) -> Signals:
    queued, pressure = values or (None, None)
    try:
        return Signals(int(queued or 0), float(pressure or 0.0))
    except ValueError:
        return NO_SIGNALS


class RedisState:
    """Routing state shared by every web process through Redis."""

    async def observe(
        self, routes: Sequence[Route], affinity: str | None, blocks: PromptBlocks | None
    ) -> Observed:
        """Every candidate's load, signals and prefix, and the conversation's
        holder: one round trip."""
        now = time.time()
        since = now - settings.SWITCHYARD_ROUTING["recent_seconds"]
        commands: list[tuple[Any, ...]] = []
        for route in routes:
            backend_id = route.backend.id
            commands.append(("ZCOUNT", inflight_key(backend_id), now, "+inf"))
            commands.append(("ZCOUNT", recent_key(backend_id), since, "+inf"))
            commands.append(("HMGET", signals_key(backend_id), "queued", "pressure"))
            if blocks is not None and blocks.hashes:
                commands.append(lookup_command(blocks, backend_id))
        if affinity:
            commands.append(("GET", _affinity_key(affinity)))
        _, results = await redis_conn.run_batch(commands)
        step = 4 if blocks is not None and blocks.hashes else 3
        at = range(0, len(routes) * step, step)
        holder = results[-1].decode() if affinity and results[-1] else None
        return Observed(
            counts=[int(results[i]) for i in at],
            signals=[_signals(results[i + 2]) for i in at],
            blocks=[found_in_redis(results[i + 3], now) if step == 4 else 0 for i in at],
            holder=holder,
            recent=[int(results[i + 1]) for i in at],
        )

    async def claim(self, routes: Sequence[Route], terms: Terms | None, lease_id: str):
        keys: list[str] = []
        for route in routes:
            keys += [inflight_key(route.backend.id), suspect_key(route.backend.id)]
        now = time.time()
        args: list[Any] = [now, redis_conn.leases.expiry(now), lease_id, random.getrandbits(30)]
        args.append(1 if terms is not None else 0)
        for i, route in enumerate(routes):
            args.append(route.backend.max_concurrency)
            args += [terms.bonus[i], terms.per_request[i]] if terms is not None else [0, 0]
        choice = int(await redis_conn.run_call(redis_conn.ScriptCall(_CLAIM, keys, args)))
        if not choice:
            return None
        redis_conn.leases.hold(keys[2 * choice - 2], lease_id)
        return choice - 1

    async def release(self, backend_id: str, lease_id: str) -> None:
        redis_conn.leases.drop(inflight_key(backend_id), lease_id)
        await redis_conn.async_client().zrem(inflight_key(backend_id), lease_id)

    async def mark_suspect(self, backend_id: str) -> None:
        await redis_conn.async_client().set(suspect_key(backend_id), b"1", ex=int(SUSPECT_SECONDS))

    async def is_suspect(self, backend_id: str) -> bool:
        return bool(await redis_conn.async_client().exists(suspect_key(backend_id)))

    async def remembered(self, key: str) -> str | None:
        value = await redis_conn.async_client().get(_affinity_key(key))
        return value.decode() if value else None

    async def remember(self, key: str, backend_id: str) -> None:
        await redis_conn.async_client().set(_affinity_key(key), backend_id, ex=AFFINITY_SECONDS)

    async def load(self, backend_id: str) -> int:
        client = redis_conn.async_client()
        key = inflight_key(backend_id)
        await client.zremrangebyscore(key, "-inf", time.time())
        return int(await client.zcard(key))


def signals_commands(backend_id: str, signals: Signals | None) -> list[tuple[Any, ...]]:
    """The Redis commands keeping a backend's polled signals (none: forget them)."""
    key = signals_key(backend_id)
    if signals is None:
        return [("DEL", key)]
    return [
        ("HSET", key, "queued", signals.queued, "pressure", signals.pressure),
        ("EXPIRE", key, int(SIGNALS_SECONDS)),
    ]
