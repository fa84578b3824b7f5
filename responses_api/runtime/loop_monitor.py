"""How late the event loop runs, and how long the cyclic collector stops it.

A web process serves every request on one event loop: anything that holds
the loop (a long collection, a synchronous database call, a large batch
encoded on the loop thread) delays every request in flight at once, and shows
as a p99 far above the p50. Two measures, exported in ``/metrics``:

- ``switchyard_event_loop_lag_seconds``: a timer due every 50 ms records how
  late it ran. One timer callback, no task, so it costs next to nothing.
- ``switchyard_gc_pause_seconds{generation}``: each cyclic collection's
  duration, from ``gc.callbacks``. Collections of the youngest generation
  run hundreds of times a second and last microseconds; they are counted in
  the histogram like the others (one ``perf_counter`` and one observation
  each), which is what makes a growing old generation visible.

``install()`` is called by ``config.serve`` once the server's loop exists.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

from prometheus_client import Histogram

INTERVAL = 0.05

LAG = Histogram(
    "switchyard_event_loop_lag_seconds",
    "How late the event loop ran a timer that was due (sampled every 50 ms).",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
GC_PAUSE = Histogram(
    "switchyard_gc_pause_seconds",
    "Duration of each cyclic garbage collection, by generation.",
    ["generation"],
    buckets=(0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
)


class _LoopLag:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due = 0.0
        self.observe = LAG.observe

    def start(self) -> None:
        self.due = time.perf_counter() + INTERVAL
        self.loop.call_later(INTERVAL, self.tick)

    def tick(self) -> None:
        now = time.perf_counter()
        self.observe(max(0.0, now - self.due))
        self.due = now + INTERVAL
        self.loop.call_later(INTERVAL, self.tick)


class _GcPauses:
    def __init__(self) -> None:
        self.started = 0.0
        self.observers = [GC_PAUSE.labels(str(g)).observe for g in range(3)]

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        elif self.started:
            self.observers[info["generation"]](time.perf_counter() - self.started)
            self.started = 0.0


_installed: _LoopLag | None = None


def install(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Start both measures on ``loop`` (the running or current one); once per process."""
    global _installed
    if _installed is not None:
        return
    loop = loop or asyncio.get_event_loop()
    _installed = _LoopLag(loop)
    loop.call_soon_threadsafe(_installed.start)
    gc.callbacks.append(_GcPauses())


def installed() -> bool:
    return _installed is not None
