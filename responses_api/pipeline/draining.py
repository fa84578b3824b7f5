"""Graceful shutdown of a web process on SIGTERM.

daphne runs on Twisted, whose own SIGTERM handler stops the reactor at once;
daphne then cancels every open request, so every stream would be cut and end
as a 499. Instead, :func:`install` (called from ``config/asgi.py``) replaces
that handler once the reactor runs. On SIGTERM the process

1. turns draining: ``/readyz`` answers 503 and the API refuses new requests
   with 503 ``server_shutting_down`` (``Retry-After: 1``);
2. lets the exchanges in flight finish, for up to
   ``SWITCHYARD_SHUTDOWN_GRACE_SECONDS``, and within the same grace the
   background responses its own worker runs or has queued
   (``background_local``);
3. ends the rest: a stream gets ``response.failed``, a request still waiting
   for its answer a 503, a background response is failed; each writes its
   usage row (status 503, ``server_shutting_down``);
4. flushes the usage rows and the trace spans still held by the process,
   then stops the reactor.

Exchanges are tracked by ``consumers.ApiConsumer`` with :meth:`Drain.track`
(and by ``websocket.Connection``, one per ``response.create``); an open
WebSocket is closed once its response under way has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings

from responses_api.protocol.errors import ApiError
from responses_api.runtime import telemetry
from responses_api.runtime.memory import BurstWatch

if TYPE_CHECKING:
    from responses_api.pipeline.exchange import Exchange

log = logging.getLogger("switchyard.shutdown")

# How long the exchanges ended at the deadline get to write their last event
# and usage row.
FINAL_WRITE_SECONDS = 5.0


class Drain:
    """This process's draining flag and its exchanges in flight."""

    def __init__(self) -> None:
        self.draining = False
        self.exchanges: dict[asyncio.Task[None], Exchange] = {}
        # Open WebSockets (``websocket.Connection``): each closes once its
        # response under way, if any, has ended.
        self.sockets: set[Any] = set()
        # The process's own background worker (``background_local``): its
        # ``drain(grace, final)`` ends what it runs, to the same deadline.
        self.workers: list[Any] = []
        self._idle: asyncio.Event | None = None
        self._bursts = BurstWatch()

    def track(self, task: asyncio.Task[None], exchange: Exchange) -> None:
        self.exchanges[task] = exchange
        self._bursts.started()
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        if self.exchanges.pop(task, None) is not None:
            self._bursts.ended()
        if not self.exchanges and self._idle is not None:
            self._idle.set()

    async def run(self, *, grace: float) -> None:
        """Drain: wait up to ``grace`` seconds, end what is left, flush the usage rows."""
        from responses_api.backends.client import close_clients
        from responses_api.runtime.metrics import process_exit
        from responses_api.usage.sink import sink

        self.draining = True
        started = time.monotonic()
        log.warning("SIGTERM: draining %d exchange(s), for up to %g s", len(self.exchanges), grace)
        self._idle = asyncio.Event()
        for socket in list(self.sockets):
            socket.shut()
        if self.exchanges:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout=grace)
        # Then the background runs, to the same deadline: they end before
        # the streams that follow them are cut, which get their last events.
        remaining = max(0.0, grace - (time.monotonic() - started))
        runs = 0
        for worker in self.workers:
            runs += await worker.drain(remaining, FINAL_WRITE_SECONDS)
        left = dict(self.exchanges)
        for task, exchange in left.items():
            exchange.shutdown_deadline()
            task.cancel()
        if left:
            await asyncio.wait(left.keys(), timeout=FINAL_WRITE_SECONDS)
        try:
            await sink.flush()
        except Exception:
            log.exception("usage rows could not be flushed at shutdown")
        await close_clients()
        # The spans of the last requests, exported before the process ends.
        await asyncio.to_thread(telemetry.shutdown)
        process_exit()
        log.warning(
            "drained in %.1f s; %d exchange(s) and %d background response(s) ended at the deadline",
            time.monotonic() - started,
            len(left),
            runs,
        )


drain = Drain()


def shutting_down() -> ApiError:
    """The error of a request refused, or ended, because this process stops."""
    return ApiError(
        503,
        "This server is shutting down; retry the request.",
        code="server_shutting_down",
        headers=[(b"retry-after", b"1")],
    )


def install() -> None:
    """Take over SIGTERM once daphne's reactor runs (nothing outside daphne)."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or "daphne.server" not in sys.modules:
        return
    # Twisted installs its handlers while starting; this runs right after.
    reactor.callWhenRunning(_take_over_sigterm, reactor)


def _take_over_sigterm(reactor) -> None:
    def on_sigterm(signum, frame) -> None:
        if drain.draining:
            return
        drain.draining = True
        reactor.callFromThread(_start, reactor)

    signal.signal(signal.SIGTERM, on_sigterm)


def _start(reactor) -> None:
    task = asyncio.get_event_loop().create_task(
        drain.run(grace=settings.SWITCHYARD_SHUTDOWN_GRACE_SECONDS)
    )
    task.add_done_callback(lambda _: reactor.stop())
    _tasks.add(task)


_tasks: set[asyncio.Task[None]] = set()
