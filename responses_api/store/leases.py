"""Who runs a background response (docs/api/background.md): its
state, its worker's lease, and the fencing token that makes a worker's
writes safe after it lost the lease.

A worker takes the queued response (:func:`claim`) with a token, one more
than the last one handed out for it, and renews its lease with it; every
write it makes carries the token (``events.append``, :func:`transition`,
``store.background``'s updates, its usage row: :func:`holds`), and is
refused once the token is no longer the current one: whoever found its
lease expired took the response with the next token (:func:`seize`). A
worker paused past its lease (a long pause of its process, a stopped
machine) thus writes nothing over the response that was ended without it,
and stops when it sees so.

Kept with the rest of the response's state (``store.events``): in Redis
(the hash's ``fence`` field, a lease key, the reapers' sorted set), or in
this process's memory.
"""

from __future__ import annotations

import time
from typing import Any

from responses_api.runtime import redis_conn
from responses_api.store.events import RUNNING, fence_holds, memory_lock, memory_log, state_key

# ARGV: the state before, after, the token the writer holds ('': none),
# '1' to take the next token (returned); KEYS[2], KEYS[3] (a claim): the
# lease to take for ARGV[5] ms, the reapers' set with ARGV[6] and ARGV[7].
_TRANSITION = """
local held = redis.call('HGET', KEYS[1], 'fence')
if redis.call('HGET', KEYS[1], 'state') ~= ARGV[1] or (ARGV[3] ~= '' and held ~= ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
if ARGV[4] ~= '1' then return 1 end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
if KEYS[2] then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[5])
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[7])
end
return fence
"""


async def transition(
    organisation_id: int, response_id: str, before: str, after: str, *, fence: int | None = None
) -> bool:
    """Move the state from ``before`` to ``after``; False when it was not
    ``before`` (someone else moved it first), or ``fence`` is not the
    current token."""
    return bool(await _move(organisation_id, response_id, before, after, fence, take=False))


async def seize(organisation_id: int, response_id: str, before: str, after: str) -> int | None:
    """Move the state and take the next token: the writes of whoever held
    the one before are refused from now on. None when it was not ``before``."""
    return await _move(organisation_id, response_id, before, after, None, take=True) or None


async def claim(organisation_id: int, response_id: str, seconds: float) -> int | None:
    """A worker takes the queued response: ``in_progress``, with the lease
    for ``seconds`` and the next token (returned), at once, so that no
    reader sees it in progress without a lease. None when it is not queued
    (cancelled meanwhile)."""
    lease = (seconds, f"{organisation_id}:{response_id}")
    taken = await _move(organisation_id, response_id, "queued", "in_progress", None, True, lease)
    return taken or None


async def _move(
    organisation_id: int,
    response_id: str,
    before: str,
    after: str,
    fence: int | None,
    take: bool,
    lease: tuple[float, str] | None = None,
) -> int:
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            if log is None or log.state != before or not fence_holds(log, fence):
                return 0
            log.state = after
            if lease is not None:
                log.lease_until = time.monotonic() + lease[0]
            if take:
                log.fence += 1
            return log.fence if take else 1
    key = state_key(organisation_id, response_id)
    args: list[Any] = [before, after, "" if fence is None else fence, "1" if take else "0"]
    keys = [key]
    if lease is not None:
        keys += [f"{key}:lease", RUNNING]
        args += [int(lease[0] * 1000), time.time() + lease[0], lease[1]]
    return int(await redis_conn.run_script(_TRANSITION, keys, args))


async def holds(organisation_id: int, response_id: str, fence: int) -> bool:
    """Whether ``fence`` is still the response's current token."""
    if not redis_conn.enabled():
        with memory_lock:
            return fence_holds(memory_log(organisation_id, response_id), fence)
    held = await redis_conn.async_client().hget(state_key(organisation_id, response_id), "fence")
    return held is not None and int(held) == fence


_RENEW = """
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return 1
"""


async def lease_renew(organisation_id: int, response_id: str, seconds: float, fence: int) -> bool:
    """The worker holding ``fence`` is alive for ``seconds`` more; False
    (nothing renewed) when the response was taken from it."""
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            if not fence_holds(log, fence):
                return False
            assert log is not None
            log.lease_until = time.monotonic() + seconds
            return True
    key = state_key(organisation_id, response_id)
    args = [fence, int(seconds * 1000), time.time() + seconds, f"{organisation_id}:{response_id}"]
    return bool(await redis_conn.run_script(_RENEW, [key, f"{key}:lease", RUNNING], args))


async def lease_drop(organisation_id: int, response_id: str) -> None:
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            if log is not None:
                log.lease_until = 0.0
        return
    await redis_conn.run_batch(
        [
            ("DEL", f"{state_key(organisation_id, response_id)}:lease"),
            ("ZREM", RUNNING, f"{organisation_id}:{response_id}"),
        ]
    )


async def lease_alive(organisation_id: int, response_id: str) -> bool:
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            return log is not None and log.lease_until > time.monotonic()
    key = f"{state_key(organisation_id, response_id)}:lease"
    return bool(await redis_conn.async_client().exists(key))


async def leases_expired() -> list[tuple[int, str]]:
    """The responses whose worker stopped renewing its lease (Redis only:
    in the embedded default the worker is this process)."""
    if not redis_conn.enabled():
        return []
    members = await redis_conn.async_client().zrangebyscore(RUNNING, "-inf", time.time())
    found = []
    for member in members:
        organisation, _, response_id = member.decode().partition(":")
        found.append((int(organisation), response_id))
    return found
