"""Where the routing's shared state lives: in the process, or in Redis.

In-flight counts, suspect marks and conversation affinity, behind one
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
from collections import OrderedDict
from collections.abc import Sequence

from responses_api.catalogue.catalog import Route
from responses_api.runtime import redis_conn

SUSPECT_SECONDS = 10.0
AFFINITY_SECONDS = 3600
AFFINITY_ENTRIES = 50_000


def choose(
    counts: Sequence[int],
    limits: Sequence[int],
    healthy: Sequence[bool],
    preferred: int | None,
    rand: int,
) -> int | None:
    """Index of the backend to use, or None when all are full.

    The reference for the Lua script in :class:`RedisState` (kept in step):
    suspect backends count only when no healthy one is left; the preferred
    (affinity) backend wins while it has a free slot; otherwise the least
    loaded, ties broken by ``rand`` so that idle backends share the load.
    """
    any_healthy = any(healthy)

    def free(i: int) -> bool:
        return (healthy[i] or not any_healthy) and (not limits[i] or counts[i] < limits[i])

    if preferred is not None and free(preferred):
        return preferred
    candidates = [i for i in range(len(counts)) if free(i)]
    if not candidates:
        return None
    least = min(counts[i] for i in candidates)
    ties = [i for i in candidates if counts[i] == least]
    return ties[rand % len(ties)]


class LocalState:
    """Routing state of one process (the embedded default)."""

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.suspect_until: dict[str, float] = {}
        self.affinity: OrderedDict[str, str] = OrderedDict()

    async def claim(self, routes: Sequence[Route], preferred: int | None, lease_id: str):
        ids = [r.backend.id for r in routes]
        now = time.monotonic()
        index = choose(
            [self.in_flight.get(i, 0) for i in ids],
            [r.backend.max_concurrency for r in routes],
            [self.suspect_until.get(i, 0.0) <= now for i in ids],
            preferred,
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

    async def load(self, backend_id: str) -> int:
        return self.in_flight.get(backend_id, 0)


# KEYS: per candidate i, its in-flight set (2i-1) and its suspect mark (2i).
# ARGV: now, lease expiry, lease id, preferred index (0: none), rand, limits…
_CLAIM = """
local now, expiry, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local preferred, rand = tonumber(ARGV[4]), tonumber(ARGV[5])
local n = #KEYS / 2
local counts, healthy, any_healthy = {}, {}, false
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[2*i-1], '-inf', now)
  counts[i] = redis.call('ZCARD', KEYS[2*i-1])
  healthy[i] = redis.call('EXISTS', KEYS[2*i]) == 0
  if healthy[i] then any_healthy = true end
end
local function free(i)
  local limit = tonumber(ARGV[5 + i])
  return (healthy[i] or not any_healthy) and (limit == 0 or counts[i] < limit)
end
local choice = 0
if preferred > 0 and free(preferred) then
  choice = preferred
else
  local least, ties = nil, {}
  for i = 1, n do
    if free(i) then
      if least == nil or counts[i] < least then
        least, ties = counts[i], {i}
      elseif counts[i] == least then
        table.insert(ties, i)
      end
    end
  end
  if #ties > 0 then choice = ties[(rand % #ties) + 1] end
end
if choice > 0 then
  redis.call('ZADD', KEYS[2*choice-1], expiry, lease)
  redis.call('EXPIRE', KEYS[2*choice-1], math.ceil(expiry - now) + 60)
end
return choice
"""


def inflight_key(backend_id: str) -> str:
    return f"sy:backend:{backend_id}:inflight"


def suspect_key(backend_id: str) -> str:
    return f"sy:backend:{backend_id}:suspect"


def _affinity_key(key: str) -> str:
    return f"sy:affinity:{key}"


class RedisState:
    """Routing state shared by every web process through Redis."""

    async def claim(self, routes: Sequence[Route], preferred: int | None, lease_id: str):
        keys: list[str] = []
        for route in routes:
            keys += [inflight_key(route.backend.id), suspect_key(route.backend.id)]
        now = time.time()
        first = (preferred + 1) if preferred is not None else 0
        args = [now, redis_conn.leases.expiry(now), lease_id, first]
        args += [random.getrandbits(30), *(r.backend.max_concurrency for r in routes)]
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
