"""What a background response shares between the web processes and the
worker running it (docs/api/background.md).

Per response, keyed by organisation and id (another organisation's id
names nothing here): its job (what the worker needs to run it), its state
(``queued``, ``in_progress``, then ``done``, ``cancelled`` or ``failed``),
a cancel flag, the worker's lease and fencing token (``store.leases``), and
its events, numbered by their ``sequence_number``, so that any web process
replays them from any point and follows the new ones; a worker's appends
carry its token. Jobs and events are content: they are kept encrypted
(``runtime.secrets``), and everything expires
``SWITCHYARD_BACKGROUND_TTL_SECONDS`` after its last write.

With ``REDIS_URL`` this is Redis (a hash, a lease key, a stream whose entry
ids are the sequence numbers, and a sorted set of the leases for the
reaper); the embedded default keeps it in this process's memory, shared by
its threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from responses_api.runtime import redis_conn
from responses_api.runtime.secrets import decrypt_bytes, encrypt_bytes

PREFIX = "switchyard:bg"
RUNNING = f"{PREFIX}:running"
# The most events one response keeps in Redis (older ones go first).
MAX_EVENTS = 200_000
# The highest ``after`` a Redis stream id can carry: event N is entry
# ``0-(N+1)``, and a read starts at ``0-(after+2)``, which must stay a
# 64-bit sequence.
_MOST_AFTER = 2**64 - 3

ACTIVE = ("queued", "in_progress")


def _ttl() -> int:
    return int(settings.SWITCHYARD_BACKGROUND_TTL_SECONDS)


def state_key(organisation_id: int, response_id: str) -> str:
    return f"{PREFIX}:{organisation_id}:{response_id}"


@dataclass(slots=True)
class Read:
    """Events after the point asked for (``(sequence_number, bytes)``), and
    whether the log has ended (nothing will follow them)."""

    events: list[tuple[int, bytes]]
    ended: bool


# --- the embedded default: this process's memory ---------------------------------


@dataclass(slots=True)
class _Log:
    state: str = "queued"
    job: bytes = b""
    cancel: bool = False
    lease_until: float = 0.0
    fence: int = 0
    events: list[bytes] = field(default_factory=list)
    ended: bool = False
    touched: float = field(default_factory=time.monotonic)
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list
    )


memory_lock = threading.Lock()
_logs: dict[tuple[int, str], _Log] = {}


def memory_log(organisation_id: int, response_id: str, create: bool = False) -> _Log | None:
    now = time.monotonic()
    for key in [k for k, log in _logs.items() if now - log.touched > _ttl()]:
        del _logs[key]
    log = _logs.get((organisation_id, response_id))
    if log is None and create:
        log = _logs[(organisation_id, response_id)] = _Log()
    if log is not None:
        log.touched = now
    return log


def _wake(log: _Log) -> None:
    waiters, log.waiters = log.waiters, []
    for loop, future in waiters:
        # A reader's loop may have closed since it began to wait.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def forget_all() -> None:
    """Drop what this process keeps in memory (as a restart of the process does)."""
    with memory_lock:
        _logs.clear()


# --- the operations ------------------------------------------------------------------


async def job_put(organisation_id: int, response_id: str, job: bytes) -> None:
    """Keep a queued response's job (state ``queued``)."""
    sealed = encrypt_bytes(job)
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id, create=True)
            assert log is not None
            log.job = sealed.encode()
        return
    key = state_key(organisation_id, response_id)
    await redis_conn.run_batch(
        [("HSET", key, "state", "queued", "job", sealed), ("EXPIRE", key, _ttl())]
    )


async def job_get(organisation_id: int, response_id: str) -> bytes | None:
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            sealed = log.job if log is not None else b""
    else:
        sealed = await redis_conn.async_client().hget(
            state_key(organisation_id, response_id), "job"
        )
    return decrypt_bytes(sealed.decode("ascii")) if sealed else None


async def state(organisation_id: int, response_id: str) -> str | None:
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            return log.state if log is not None else None
    value = await redis_conn.async_client().hget(state_key(organisation_id, response_id), "state")
    return value.decode() if value else None


def fence_holds(log: _Log | None, fence: int | None) -> bool:
    return log is not None and (fence is None or log.fence == fence)


async def cancel_request(organisation_id: int, response_id: str) -> None:
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            if log is not None:
                log.cancel = True
        return
    await redis_conn.async_client().hset(state_key(organisation_id, response_id), "cancel", "1")


async def cancel_requested(organisation_id: int, response_id: str) -> bool:
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            return log is not None and log.cancel
    value = await redis_conn.async_client().hget(state_key(organisation_id, response_id), "cancel")
    return bool(value)


async def append(
    organisation_id: int,
    response_id: str,
    first: int,
    events: Sequence[bytes],
    *,
    end: bool = False,
    fence: int | None = None,
) -> bool:
    """Add ``events``, numbered from ``first``; ``end`` closes the log.
    False (nothing added) when ``fence`` is not the current token."""
    sealed = [encrypt_bytes(event) for event in events]
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id, create=fence is None)
            if not fence_holds(log, fence):
                return False
            assert log is not None
            log.events.extend(token.encode() for token in sealed)
            log.ended = log.ended or end
            _wake(log)
        return True
    stream = f"{state_key(organisation_id, response_id)}:events"
    if fence is not None:
        key = state_key(organisation_id, response_id)
        args = [fence, first, "1" if end else "", _ttl(), MAX_EVENTS, *sealed]
        return bool(await redis_conn.run_script(_APPEND, [key, stream], args))
    commands: list[tuple[Any, ...]] = [
        ("XADD", stream, "MAXLEN", "~", MAX_EVENTS, f"0-{first + i + 1}", "e", token)
        for i, token in enumerate(sealed)
    ]
    if end:
        commands.append(("XADD", stream, "*", "end", "1"))
    commands.append(("EXPIRE", stream, _ttl()))
    commands.append(("EXPIRE", state_key(organisation_id, response_id), _ttl()))
    await redis_conn.run_batch(commands)
    return True


# ARGV: the token, the first number, '1' to end the log, the TTL, the most
# events kept, then the sealed events.
_APPEND = """
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then return 0 end
for i = 6, #ARGV do
  local id = '0-' .. (tonumber(ARGV[2]) + i - 5)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], id, 'e', ARGV[i])
end
if ARGV[3] == '1' then redis.call('XADD', KEYS[2], '*', 'end', '1') end
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


async def read(organisation_id: int, response_id: str, after: int, *, wait: float = 0.0) -> Read:
    """The events numbered above ``after``; when there are none yet and the
    log is open, waits up to ``wait`` seconds for some. Any ``after`` is
    read (the web side refuses a cursor outside the log; this holds for
    every other caller): below -1 it is -1, the first event, so that no
    number makes the list wrap round or the stream id invalid."""
    after = min(max(after, -1), _MOST_AFTER)
    if not redis_conn.enabled():
        return await _read_memory(organisation_id, response_id, after, wait)
    client = redis_conn.async_client()
    stream = f"{state_key(organisation_id, response_id)}:events"
    entries = await client.xrange(stream, f"0-{after + 2}", "+")
    if not entries and wait > 0:
        found = await redis_conn.blocking(
            lambda waiting: waiting.xread({stream: f"0-{after + 1}"}, block=int(wait * 1000)),
            wait,
        )
        entries = found[0][1] if found else []
    events: list[tuple[int, bytes]] = []
    ended = False
    for entry_id, fields in entries:
        if b"end" in fields:
            ended = True
            break
        number = int(entry_id.split(b"-")[1]) - 1
        events.append((number, decrypt_bytes(fields[b"e"].decode("ascii"))))
    return Read(events, ended)


async def _read_memory(organisation_id: int, response_id: str, after: int, wait: float) -> Read:
    loop = asyncio.get_running_loop()
    with memory_lock:
        log = memory_log(organisation_id, response_id)
        if log is None:
            return Read([], True)
        future: asyncio.Future[None] | None = None
        if len(log.events) <= after + 1 and not log.ended and wait > 0:
            future = loop.create_future()
            log.waiters.append((loop, future))
    if future is not None:
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, wait)
        finally:
            # Not woken (a timeout, a client gone): no longer waiting, so
            # that an open log keeps no waiter per read that timed out.
            with memory_lock, contextlib.suppress(ValueError):
                log.waiters.remove((loop, future))
    with memory_lock:
        sealed = log.events[after + 1 :]
        ended = log.ended
    return Read(
        [(after + 1 + i, decrypt_bytes(token.decode("ascii"))) for i, token in enumerate(sealed)],
        ended,
    )


async def next_number(organisation_id: int, response_id: str) -> int:
    """The number the next event of the log gets."""
    if not redis_conn.enabled():
        with memory_lock:
            log = memory_log(organisation_id, response_id)
            return len(log.events) if log is not None else 0
    stream = f"{state_key(organisation_id, response_id)}:events"
    for entry_id, fields in await redis_conn.async_client().xrevrange(stream, "+", "-", count=2):
        if b"end" not in fields:
            return int(entry_id.split(b"-")[1])
    return 0
