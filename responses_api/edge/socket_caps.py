"""How many WebSockets one API key, and one organisation, may hold open.

A socket idle between responses costs its process a connection, a task and
its chain's memory, and no request limit counts it: without a bound, one
key could hold thousands. Each open socket therefore holds a place under
its key (``SWITCHYARD_WEBSOCKETS_PER_KEY``) and its organisation
(``SWITCHYARD_WEBSOCKETS_PER_ORGANISATION``); a socket past either is
refused (``websocket_limit_reached``, 429, close 4429). 0 lifts a bound.

With ``REDIS_URL`` the places are counted across web processes: each is a
member of a Redis sorted set whose score is its expiry, renewed while the
socket is open (``redis_conn.leases``), so a process that dies frees its
sockets' places once their leases expire (30 seconds) and a socket that
closes, however it closes, frees its own at once. In the embedded default
the process counts its own.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from django.conf import settings

from responses_api.access.auth import Caller
from responses_api.protocol.errors import ApiError
from responses_api.runtime import redis_conn

# KEYS: the sets of places; ARGV: now, expiry, member, then each set's cap.
# Returns the 1-based index of the set that is full, or 0 once taken.
_TAKE = """
local now, expiry, member = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[3 + i]) then return i end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, member)
  redis.call('EXPIRE', KEYS[i], math.ceil(expiry - now) + 60)
end
return 0
"""

# This process's places (the embedded default): set name -> members.
_local: dict[str, set[str]] = {}


@dataclass(frozen=True, slots=True)
class _Bound:
    key: str
    cap: int
    setting: str
    scope: str


def _bounds(caller: Caller) -> list[_Bound]:
    bounds = [
        _Bound(
            f"sy:ws:key:{caller.key_id}",
            settings.SWITCHYARD_WEBSOCKETS_PER_KEY,
            "SWITCHYARD_WEBSOCKETS_PER_KEY",
            "API key",
        ),
        _Bound(
            f"sy:ws:organisation:{caller.organisation_id}",
            settings.SWITCHYARD_WEBSOCKETS_PER_ORGANISATION,
            "SWITCHYARD_WEBSOCKETS_PER_ORGANISATION",
            "organisation",
        ),
    ]
    return [bound for bound in bounds if bound.cap > 0]


def limit_reached(bound: _Bound) -> ApiError:
    return ApiError(
        429,
        f"This {bound.scope} already holds {bound.cap} open WebSockets, the limit "
        f"({bound.setting}): close one before opening another.",
        code="websocket_limit_reached",
    )


class Place:
    """One socket's place under each of its bounds, until :meth:`give_back`."""

    __slots__ = ("keys", "member")

    def __init__(self, keys: list[str], member: str) -> None:
        self.keys = keys
        self.member = member

    async def give_back(self) -> None:
        keys, self.keys = self.keys, []
        if not redis_conn.enabled():
            for key in keys:
                members = _local.get(key)
                if members is not None:
                    members.discard(self.member)
                    if not members:
                        del _local[key]
            return
        for key in keys:
            # Renewed no more: were the ZREM lost, the place expires.
            redis_conn.leases.drop(key, self.member)
        if keys:
            await redis_conn.run_batch([("ZREM", key, self.member) for key in keys])


async def take(caller: Caller) -> Place:
    """A place for one more socket of ``caller``; the ``ApiError`` naming
    the bound that is full otherwise."""
    bounds = _bounds(caller)
    member = uuid.uuid4().hex
    keys = [bound.key for bound in bounds]
    if not redis_conn.enabled():
        for bound in bounds:
            if len(_local.get(bound.key, ())) >= bound.cap:
                raise limit_reached(bound)
        for key in keys:
            _local.setdefault(key, set()).add(member)
        return Place(keys, member)
    if not bounds:
        return Place([], member)
    now = time.time()
    args: list[float | int | str] = [now, redis_conn.leases.expiry(now), member]
    args += [bound.cap for bound in bounds]
    full = int(await redis_conn.run_call(redis_conn.ScriptCall(_TAKE, keys, args)))
    if full:
        raise limit_reached(bounds[full - 1])
    for key in keys:
        redis_conn.leases.hold(key, member)
    return Place(keys, member)
