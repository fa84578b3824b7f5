"""The process's connection to Redis, when ``REDIS_URL`` is set.

Routing, rate limits and the usage queue share state across web processes
through Redis. Async clients are bound to the event loop that made them, so
there is one per loop (a process normally has one; tests may have several).
Nothing connects at import time.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """One run of a Lua script: its source, keys and arguments."""

    source: str
    keys: list[str]
    args: list[Any]

    @property
    def sha(self) -> str:
        return _sha(self.source)


_shas: dict[str, str] = {}


def _sha(source: str) -> str:
    sha = _shas.get(source)
    if sha is None:
        sha = _shas[source] = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 (Redis' id)
    return sha


async def run_call(call: ScriptCall) -> Any:
    return await run_script(call.source, call.keys, call.args)


async def run_batch(
    commands: Sequence[Sequence[Any]], scripts: Sequence[ScriptCall] = ()
) -> tuple[list[Any], list[Any]]:
    """Scripts (by ``EVALSHA``) then plain commands, in one round trip:
    ``(script results, command results)``.

    A script the server does not know yet did not run: it is loaded and run
    again on its own (once per server and script). redis-py's own pipelined
    scripts would instead ask ``SCRIPT EXISTS`` first, on every pipeline."""
    import redis.exceptions

    async with async_client().pipeline(transaction=False) as pipe:
        for call in scripts:
            pipe.execute_command("EVALSHA", call.sha, len(call.keys), *call.keys, *call.args)
        for command in commands:
            pipe.execute_command(*command)
        results = await pipe.execute(raise_on_error=False)
    for i, call in enumerate(scripts):
        if isinstance(results[i], redis.exceptions.NoScriptError):
            results[i] = await run_call(call)
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results[: len(scripts)], results[len(scripts) :]


@dataclass(slots=True)
class Release:
    """What a request gives back as it ends (a lease, a rate-limit window's
    correction): plain commands, sent after its usage row in the round trip
    that hands the row over, and what to do once they ran (wake the
    process's requests waiting for the slot)."""

    commands: list[tuple[Any, ...]]
    done: list[Callable[[], None]] = field(default_factory=list)


async def run_releases(releases: Sequence[Release]) -> None:
    """Releases on their own round trip (a request ending without a row)."""
    commands = [command for release in releases for command in release.commands]
    try:
        if commands:
            await run_batch(commands)
    finally:
        released(releases)


def released(releases: Sequence[Release]) -> None:
    for release in releases:
        for done in release.done:
            done()


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
