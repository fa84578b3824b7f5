"""One load at a time per cache entry, and expired entries refreshed behind
the requests that use them.

The hot path's caches (API keys, catalogues) expire every few seconds. When
each request that found its entry expired loaded it again itself, the 32
requests in flight at the moment of expiry queued 32 identical queries on
the one thread that runs the process's synchronous code, and all of them
waited for the last: the benchmark's worst latencies (hundreds of
milliseconds at concurrency 32) came in a burst every five seconds
(bench/README.md, §33). Now a request that finds its entry expired but
recent uses it and starts a reload that all others share; only a missing
or long-expired entry makes requests wait, and then for a single load.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

log = logging.getLogger(__name__)


class Flights:
    """The loads in progress, by key: callers of :meth:`join` while one runs
    share its result. ``forgotten`` counts the cache's drops (:meth:`forget`):
    a load that saw it change meanwhile must not cache what it read, which
    may predate the change."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.forgotten = 0
        self._running: dict[Hashable, asyncio.Task[Any]] = {}

    def forget(self) -> None:
        self.forgotten += 1

    def join(self, key: Hashable, load: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        """The load of ``key`` under way, else a new one running ``load``.
        Awaiting the result is shielded: a caller that is cancelled does not
        cancel the load the others wait for."""
        task = self._running.get(key)
        loop = asyncio.get_running_loop()
        # A task of another loop (tests run several) is not ours to share.
        if task is None or task.done() or task.get_loop() is not loop:
            task = asyncio.ensure_future(load(), loop=loop)
            self._running[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return asyncio.shield(task)

    def refresh(self, key: Hashable, load: Callable[[], Awaitable[Any]]) -> None:
        """Start (or leave running) the load of ``key`` without waiting for it."""
        self.join(key, load).add_done_callback(self._log_failure)

    def _finished(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        if self._running.get(key) is task:
            del self._running[key]

    def _log_failure(self, future: asyncio.Future[Any]) -> None:
        # Nobody awaits a refresh: its failure is logged here (the stale
        # entry stays in use, and the next request tries again).
        if not future.cancelled() and future.exception() is not None:
            log.warning("%s: refresh failed", self.name, exc_info=future.exception())
