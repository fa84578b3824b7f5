"""The process's connection to Redis, when ``REDIS_URL`` is set.

Routing, rate limits and the usage queue share state across web processes
through Redis. Async clients are bound to the event loop that made them, so
there is one per loop (a process normally has one; tests may have several).
Nothing connects at import time.

Every connection and every answer is bounded in time
(``SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS``, ``SWITCHYARD_REDIS_TIMEOUT_SECONDS``):
a Redis that accepts connections and never answers fails the call with a
``TimeoutError``, which requests answer as an outage (a 503) and the usage
writer takes as Redis out of reach, as it does a refused connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings

from responses_api.runtime.outages import failure_seen

T = TypeVar("T")

# Keyed by the loop itself (weakly): a closed loop's client goes with it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def enabled() -> bool:
    return bool(settings.REDIS_URL)


def async_client() -> Any:
    """The asyncio Redis client of the running loop (``REDIS_URL`` must be set)."""
    from responses_api.runtime import redis_urls

    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # A blocking pool: a thousand streams ending together wait for a
        # connection instead of failing (the default pool raises "Too many
        # connections" past its limit, and the request would lose its row).
        client = redis_urls.async_client(
            settings.REDIS_URL, max_connections=100, timeout=30, **timeouts()
        )
        _clients[loop] = client
    return client


async def close_loop_clients() -> None:
    """Close the clients of the running event loop, which is about to end
    (a Celery worker's run has a loop of its own)."""
    loop = asyncio.get_running_loop()
    for clients in (_clients, _blocking):
        client = clients.pop(loop, None)
        if client is not None:
            await client.aclose()


def timeouts(block: float = 0.0) -> dict[str, float]:
    """The clients' socket timeouts; a client whose commands wait on the
    server up to ``block`` seconds (``XREADGROUP ... BLOCK``) reads that
    much longer, or every quiet wait would end as a timeout."""
    return {
        "socket_connect_timeout": settings.SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": settings.SWITCHYARD_REDIS_TIMEOUT_SECONDS + block,
    }


_blocking: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


async def blocking(send: Callable[[Any], Awaitable[T]], block: float) -> T:
    """A command that waits on the server up to ``block`` seconds
    (``XREAD ... BLOCK``), sent by ``send`` on the client it is given.

    Such a wait is longer than the read timeout of the loop's client, and
    varies, so it goes through a client of its own with no read timeout,
    bounded here at ``block`` plus that timeout; past it the connection is
    dropped (redis-py closes a connection whose read is cancelled) and
    Redis' ``TimeoutError`` raised, as for any other unanswered call."""
    import redis.exceptions

    from responses_api.runtime import redis_urls

    loop = asyncio.get_running_loop()
    client = _blocking.get(loop)
    if client is None:
        options = timeouts() | {"socket_timeout": None}
        client = redis_urls.async_client(
            settings.REDIS_URL, max_connections=100, timeout=30, **options
        )
        _blocking[loop] = client
    bound = block + settings.SWITCHYARD_REDIS_TIMEOUT_SECONDS
    try:
        async with asyncio.timeout(bound) as scope:
            return await send(client)
    except TimeoutError as exc:
        if scope.expired():
            raise redis.exceptions.TimeoutError(f"no answer from Redis in {bound:g} s") from exc
        raise


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
    """One script, in the round trip of the loop's turn (:func:`run_batch`)."""
    return (await run_batch((), (call,)))[0][0]


async def run_batch(
    commands: Sequence[Sequence[Any]], scripts: Sequence[ScriptCall] = ()
) -> tuple[list[Any], list[Any]]:
    """Scripts (by ``EVALSHA``) then plain commands, in one round trip:
    ``(script results, command results)``; the first error is raised.

    The round trip is shared: every batch asked for in the same turn of the
    event loop goes out in one pipeline on the next (:class:`_Batches`), so
    requests ending together at high concurrency pay for one round trip, not
    one each. A caller cancelled before its turn sends nothing."""
    loop = asyncio.get_running_loop()
    batches = _batches.get(loop)
    if batches is None:
        batches = _batches[loop] = _Batches(loop)
    return await batches.add(commands, scripts)


_Waiting = tuple[Sequence[Sequence[Any]], Sequence[ScriptCall], "asyncio.Future[Any]"]


class _Batches:
    """The batches waiting for the loop's next turn, and the task sending them."""

    __slots__ = ("loop", "task", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: list[_Waiting] = []
        self.task: asyncio.Task[None] | None = None

    def add(
        self, commands: Sequence[Sequence[Any]], scripts: Sequence[ScriptCall]
    ) -> asyncio.Future[Any]:
        future = self.loop.create_future()
        self.waiting.append((commands, scripts, future))
        if self.task is None:
            # Its first step runs on the loop's next turn, after everything
            # that is ready now has added its batch.
            self.task = task = self.loop.create_task(self._send())
            # The loop holds tasks weakly: this one is held until it is done.
            _sending.add(task)
            task.add_done_callback(_sending.discard)
        return future

    async def _send(self) -> None:
        waiting, self.waiting, self.task = self.waiting, [], None
        live = [entry for entry in waiting if not entry[2].done()]
        if not live:
            return
        try:
            results = await _pipeline(live)
        except BaseException as exc:
            failure_seen(exc)
            for _, _, future in live:
                if future.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        at = 0
        for commands, scripts, future in live:
            mine = results[at : at + len(scripts) + len(commands)]
            at += len(mine)
            for i, call in enumerate(scripts):
                if _no_script(mine[i]):
                    try:
                        mine[i] = await run_script(call.source, call.keys, call.args)
                    except Exception as exc:  # noqa: BLE001 (the caller's to raise)
                        mine[i] = exc
            if future.done():
                continue
            error = next((r for r in mine if isinstance(r, Exception)), None)
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result((mine[: len(scripts)], mine[len(scripts) :]))


_sending: set[asyncio.Task[None]] = set()
_batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batches] = (
    weakref.WeakKeyDictionary()
)


def _no_script(result: Any) -> bool:
    import redis.exceptions

    return isinstance(result, redis.exceptions.NoScriptError)


async def _pipeline(batches: Sequence[_Waiting]) -> list[Any]:
    """Every batch's scripts and commands in one round trip, each result in
    its place (errors too). redis-py's own pipelined scripts would ask
    ``SCRIPT EXISTS`` first, on every pipeline; a lone command skips the
    pipeline's machinery."""
    client = async_client()
    if len(batches) == 1 and len(batches[0][0]) + len(batches[0][1]) == 1:
        commands, scripts, _ = batches[0]
        command = commands[0] if commands else _evalsha(scripts[0])
        try:
            return [await client.execute_command(*command)]
        except Exception as exc:
            import redis.exceptions

            if isinstance(exc, redis.exceptions.ResponseError):
                return [exc]
            raise
    async with client.pipeline(transaction=False) as pipe:
        for commands, scripts, _ in batches:
            for call in scripts:
                pipe.execute_command(*_evalsha(call))
            for command in commands:
                pipe.execute_command(*command)
        return list(await pipe.execute(raise_on_error=False))


def _evalsha(call: ScriptCall) -> tuple[Any, ...]:
    return ("EVALSHA", call.sha, len(call.keys), *call.keys, *call.args)


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


def sync_client(**options: Any) -> Any:
    """A ``redis.Redis`` with the socket timeouts of :func:`timeouts`, unless
    ``options`` give their own."""
    from responses_api.runtime import redis_urls

    return redis_urls.sync_client(settings.REDIS_URL, **(timeouts() | options))


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
        # Per lease: the task whose end ends it, and the monotonic time past
        # which it is renewed no more (None: neither, it lasts until dropped).
        self.held: dict[tuple[str, str], tuple[asyncio.Future[Any] | None, float | None]] = {}
        self._tasks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
            weakref.WeakKeyDictionary()
        )

    def expiry(self, now: float) -> float:
        return now + self.seconds

    def hold(
        self,
        key: str,
        member: str,
        *,
        owner: asyncio.Future[Any] | None = None,
        at_most: float | None = None,
    ) -> None:
        """Renew ``member`` until it is dropped; with ``owner``, no longer
        once that task is done, and with ``at_most``, no longer than that
        many seconds: a lease whose holder ended without dropping it (a bug
        on some ending) then expires as a dead process's does."""
        until = time.monotonic() + at_most if at_most is not None else None
        self.held[(key, member)] = (owner, until)
        loop = asyncio.get_running_loop()
        task = self._tasks.get(loop)
        if task is None or task.done():
            self._tasks[loop] = loop.create_task(self._renew_forever())

    def drop(self, key: str, member: str) -> None:
        self.held.pop((key, member), None)

    def _ended(self) -> None:
        """Stop renewing the leases whose owner ended or whose time is up."""
        now = time.monotonic()
        for lease, (owner, until) in list(self.held.items()):
            if (owner is not None and owner.done()) or (until is not None and now >= until):
                self.held.pop(lease, None)

    async def _renew_forever(self) -> None:
        import logging

        while self.held:
            await asyncio.sleep(self.seconds / 3)
            self._ended()
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
