"""Choosing a backend for a request (SPEC §5).

Eligible: enabled, not offline, serving the model, below its concurrency
limit. Among those the least loaded wins; a conversation (``prompt_cache_key``
or its leading prompt) prefers the backend that served it last, so the
backend's prefix cache is reused. When every eligible backend is full the
request waits for a slot, up to ``SWITCHYARD_QUEUE_TIMEOUT`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings

from responses_api.catalog import ModelEntry, Route
from responses_api.errors import ApiError
from responses_api.metrics import in_flight_add

SUSPECT_SECONDS = 10.0
AFFINITY_ENTRIES = 50_000


@dataclass(slots=True)
class Lease:
    route: Route
    queue_wait_ms: float
    released: bool = False


class Router:
    """In-flight counts for this process's requests, per backend."""

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.suspect_until: dict[str, float] = {}
        self.affinity: OrderedDict[str, str] = OrderedDict()
        self._freed: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.waiting = 0
        self._notifiers: set[asyncio.Task[None]] = set()

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._freed is None or self._loop is not loop:
            self._freed = asyncio.Condition()
            self._loop = loop
        return self._freed

    def mark_suspect(self, backend_id: str) -> None:
        self.suspect_until[backend_id] = time.monotonic() + SUSPECT_SECONDS

    def remember(self, affinity_key: str | None, backend_id: str) -> None:
        if affinity_key:
            self.affinity[affinity_key] = backend_id
            self.affinity.move_to_end(affinity_key)
            while len(self.affinity) > AFFINITY_ENTRIES:
                self.affinity.popitem(last=False)

    def candidates(
        self, model: ModelEntry, *, pinned: str | None, exclude: set[str]
    ) -> list[Route]:
        routes = [r for r in model.routes if r.backend.enabled]
        if pinned is not None:
            routes = [r for r in routes if r.backend.id == pinned]
            if not routes:
                raise ApiError(
                    404,
                    f"Backend '{pinned}' (X-Backend-Id) does not serve "
                    f"the model '{model.public_id}'.",
                    code="backend_not_found",
                    param="X-Backend-Id",
                )
            if routes[0].backend.health == "offline":
                raise ApiError(
                    503,
                    f"Backend '{routes[0].backend.name}' (X-Backend-Id) is offline.",
                    code="backend_offline",
                    headers=[(b"retry-after", b"10")],
                )
            return [r for r in routes if r.backend.id not in exclude]
        now = time.monotonic()
        online = [
            r
            for r in routes
            if r.backend.health != "offline"
            and r.backend.id not in exclude
            and self.suspect_until.get(r.backend.id, 0.0) <= now
        ]
        if not online and not exclude:
            # Every backend is suspect or offline: try the suspect ones rather
            # than refuse outright; a health check may simply be stale.
            online = [r for r in routes if r.backend.health != "offline"]
        return online

    def _pick(self, routes: list[Route], affinity_key: str | None) -> Route | None:
        free = [
            r
            for r in routes
            if not r.backend.max_concurrency
            or self.in_flight.get(r.backend.id, 0) < r.backend.max_concurrency
        ]
        if not free:
            return None
        if affinity_key:
            preferred = self.affinity.get(affinity_key)
            for route in free:
                if route.backend.id == preferred:
                    return route
        return min(free, key=lambda r: self.in_flight.get(r.backend.id, 0))

    async def acquire(
        self,
        model: ModelEntry,
        *,
        pinned: str | None = None,
        affinity_key: str | None = None,
        exclude: set[str] | None = None,
    ) -> Lease:
        exclude = exclude or set()
        routes = self.candidates(model, pinned=pinned, exclude=exclude)
        if not routes:
            raise ApiError(
                503,
                f"No backend is online for the model '{model.public_id}'. Try again shortly.",
                code="no_backend_available",
                headers=[(b"retry-after", b"10")],
            )
        started = time.perf_counter()
        route = self._pick(routes, affinity_key)
        if route is None:
            condition = self._condition()
            deadline = started + settings.SWITCHYARD_QUEUE_TIMEOUT
            self.waiting += 1
            try:
                async with condition:
                    while route is None:
                        left = deadline - time.perf_counter()
                        if left <= 0:
                            raise ApiError(
                                503,
                                f"Every backend serving '{model.public_id}' is at its concurrency "
                                "limit and none freed up within "
                                f"{settings.SWITCHYARD_QUEUE_TIMEOUT:g} s.",
                                code="backends_saturated",
                                headers=[(b"retry-after", b"5")],
                            )
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(condition.wait(), timeout=left)
                        route = self._pick(routes, affinity_key)
            finally:
                self.waiting -= 1
        self.in_flight[route.backend.id] = self.in_flight.get(route.backend.id, 0) + 1
        in_flight_add(backend=route.backend.name, delta=1)
        return Lease(route=route, queue_wait_ms=(time.perf_counter() - started) * 1000)

    def release(self, lease: Lease) -> None:
        if lease.released:
            return
        lease.released = True
        backend_id = lease.route.backend.id
        self.in_flight[backend_id] = max(self.in_flight.get(backend_id, 1) - 1, 0)
        in_flight_add(backend=lease.route.backend.name, delta=-1)
        condition = self._freed
        if self.waiting and condition is not None and self._loop is not None:
            task = self._loop.create_task(self._notify(condition))
            self._notifiers.add(task)
            task.add_done_callback(self._notifiers.discard)

    @staticmethod
    async def _notify(condition: asyncio.Condition) -> None:
        async with condition:
            condition.notify(1)


router = Router()
