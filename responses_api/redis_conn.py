"""The process's connection to Redis, when ``REDIS_URL`` is set.

Routing, rate limits and the usage queue share state across web processes
through Redis. Async clients are bound to the event loop that made them, so
there is one per loop (a process normally has one; tests may have several).
Nothing connects at import time.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from django.conf import settings

# Keyed by the loop itself (weakly): a closed loop's client goes with it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def enabled() -> bool:
    return bool(settings.REDIS_URL)


def async_client() -> Any:
    """The asyncio Redis client of the running loop (``REDIS_URL`` must be set)."""
    import redis.asyncio

    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # A blocking pool: a thousand streams ending together wait for a
        # connection instead of failing (the default pool raises "Too many
        # connections" past its limit, and the request would lose its row).
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            settings.REDIS_URL, max_connections=100, timeout=30
        )
        client = redis.asyncio.Redis(connection_pool=pool)
        _clients[loop] = client
    return client


_scripts: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


async def run_script(source: str, keys: list[str], args: list[Any]) -> Any:
    """Run a Lua script by its SHA1 (``EVALSHA``), loading it when the server
    does not know it yet: ``EVAL`` would send and hash the whole script on
    every request."""
    client = async_client()
    scripts = _scripts.setdefault(client, {})
    script = scripts.get(source)
    if script is None:
        script = scripts[source] = client.register_script(source)
    return await script(keys=keys, args=args)


def sync_client() -> Any:
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


class LeaseKeeper:
    """Keeps this process's leases alive in Redis sorted sets.

    A lease is a member of a sorted set whose score is its expiry time.
    Holders renew theirs every ``seconds / 3``; when a process dies its leases
    stop being renewed and readers drop them once expired (readers call
    ``ZREMRANGEBYSCORE key -inf now`` before counting). So a crash frees its
    slots after at most ``seconds``, without any cleanup job.
    """

    def __init__(self, seconds: float = 30.0) -> None:
        self.seconds = seconds
        self.held: dict[tuple[str, str], None] = {}
        self._tasks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
            weakref.WeakKeyDictionary()
        )

    def expiry(self, now: float) -> float:
        return now + self.seconds

    def hold(self, key: str, member: str) -> None:
        self.held[(key, member)] = None
        loop = asyncio.get_running_loop()
        task = self._tasks.get(loop)
        if task is None or task.done():
            self._tasks[loop] = loop.create_task(self._renew_forever())

    def drop(self, key: str, member: str) -> None:
        self.held.pop((key, member), None)

    async def _renew_forever(self) -> None:
        import logging
        import time

        while self.held:
            await asyncio.sleep(self.seconds / 3)
            held = list(self.held)
            if not held:
                continue
            expiry = time.time() + self.seconds
            try:
                async with async_client().pipeline(transaction=False) as pipe:
                    for key, member in held:
                        pipe.zadd(key, {member: expiry}, xx=True)
                    await pipe.execute()
            except Exception:  # Redis briefly away: the next round retries
                logging.getLogger(__name__).warning(
                    "could not renew %d leases", len(held), exc_info=True
                )


leases = LeaseKeeper()
