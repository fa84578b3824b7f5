"""The web process's own worker for background responses (the embedded
default, and ``SWITCHYARD_BACKGROUND_RUNNER=local``): a thread with an
event loop of its own, so that the responses outlive the requests that
queued them (docs/api/background.md).

At most ``SWITCHYARD_BACKGROUND_LOCAL_CONCURRENCY`` responses run at once
(each holds a backend request and its memory); the others wait queued, in
the order they came, and start as runs end. On SIGTERM (``draining``) the
runs and the queue get the shutdown grace to end; then the runs still going
are ended as failed (a shutdown, as an HTTP stream cut at the deadline is),
and those still queued too, each with its usage row.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

Work = Callable[..., Coroutine[Any, Any, None]]


class LocalWorker:
    """``run(organisation_id, response_id, stop=...)`` runs a response (it
    ends it when ``stop`` is set), ``shut_out`` ends one still queued at the
    shutdown deadline, ``close`` closes what a loop opened."""

    def __init__(self, run: Work, shut_out: Work, close: Work) -> None:
        self.work = run, shut_out, close
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lock = threading.Lock()
        # Every response handed over and not ended yet, running or queued.
        self.running: set[concurrent.futures.Future[None]] = set()
        # Of the current loop, touched only on its thread.
        self.waiting: deque[tuple[int, str, concurrent.futures.Future[None]]] = deque()
        self.active = 0
        # Set at the shutdown deadline: what is left ends failed.
        self.ending = threading.Event()

    def submit(self, organisation_id: int, response_id: str) -> None:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self.lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                self.waiting, self.active = deque(), 0
                threading.Thread(
                    target=self.loop.run_forever, name="background-responses", daemon=True
                ).start()
            loop = self.loop
            self.running.add(future)
        future.add_done_callback(self._done)
        loop.call_soon_threadsafe(self._queue, organisation_id, response_id, future)

    def _queue(self, organisation_id: int, response_id: str, future: Any) -> None:
        self.waiting.append((organisation_id, response_id, future))
        self._start()

    def _start(self) -> None:
        """Start the queued responses a slot is free for (all of them, to
        be ended, past the shutdown deadline)."""
        run, shut_out, _ = self.work
        limit = settings.SWITCHYARD_BACKGROUND_LOCAL_CONCURRENCY
        while self.waiting and (self.active < limit or self.ending.is_set()):
            organisation_id, response_id, future = self.waiting.popleft()
            self.active += 1
            if self.ending.is_set():
                work = shut_out(organisation_id, response_id)
            else:
                work = run(organisation_id, response_id, stop=self.ending)
            # In a context of its own: the request's (its thread-sensitive
            # executor for the ORM among them) ends with the request.
            task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
            task.add_done_callback(functools.partial(self._ended, future))

    def _ended(self, future: concurrent.futures.Future[None], task: asyncio.Task[None]) -> None:
        self.active -= 1
        if task.cancelled():
            future.cancel()
        elif (error := task.exception()) is not None:
            future.set_exception(error)
        else:
            future.set_result(None)
        self._start()

    async def drain(self, grace: float, final: float) -> int:
        """SIGTERM: let the responses handed over end within ``grace``
        seconds, then end those left (given ``final`` seconds to write
        their ending and row); how many were left."""
        waiting = [asyncio.wrap_future(future) for future in list(self.running)]
        if not waiting:
            return 0
        _, left = await asyncio.wait(waiting, timeout=grace)
        if left:
            self.ending.set()
            loop = self.loop
            if loop is not None:
                loop.call_soon_threadsafe(self._start)
            await asyncio.wait(left, timeout=final)
        return len(left)

    def close(self) -> None:
        """Close what the thread's loop holds open (backend connections,
        Redis), once the responses it runs have ended; a later response
        starts a new loop."""
        with self.lock:
            loop, self.loop = self.loop, None
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self.work[2](), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)

    def _done(self, future: concurrent.futures.Future[None]) -> None:
        self.running.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.error("background response failed", exc_info=future.exception())
