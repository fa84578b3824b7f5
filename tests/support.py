"""Helpers for tests that wait on something outside the test: poll a
condition against a deadline rather than sleep for a guessed time; watch
a server's ``/healthz`` while a test does something hostile to it."""

from __future__ import annotations

import contextlib
import math
import socketserver
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import httpx

T = TypeVar("T")

# A probe that does not answer within this counts as never answered. A
# frozen loop never answers; a loaded two-core CI machine running a vLLM
# engine beside the suite has been seen to hold one probe for over 2 s.
PROBE_TIMEOUT = 5.0
# The bound on ``/healthz``'s answer, checked on the median of the probes.
# A frozen loop answers in seconds or not at all; a loop that goes on
# serving answers in milliseconds, but the suite runs three workers on two
# cores in CI, where a short case's handful of probes has been seen at a
# median of 110 ms while the same case alone stays under 10 ms.
HEALTHZ_MEDIAN = 0.25
# Probes at once while a hostile case runs, each on a connection of its own:
# a case may last only tens of milliseconds, and one slow probe of two would
# decide their median.
WATCHERS = 3


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Serves ``server`` on a daemon thread. Its loop looks for
    ``shutdown()`` every 20 ms rather than the standard library's 500:
    servers a test starts and stops would otherwise add half a second each."""
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    return thread


class WaitTimeout(AssertionError):
    """A condition a test waited for did not come true in time."""


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy
    value, and return that value; raise ``WaitTimeout`` naming ``message``
    (a string, or a callable giving one, for state read at the time) once
    ``timeout`` seconds have passed. An exception from ``predicate`` stops
    the wait at once (a server that died will not come up)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise WaitTimeout(f"{text} within {timeout} s")
        time.sleep(interval)


def _probe(client: httpx.Client, failures: list[str]) -> float:
    """How long one ``/healthz`` took to answer 200, in seconds; infinite
    (and the reason noted in ``failures``) when it did not."""
    started = time.perf_counter()
    try:
        answer = client.get("/healthz")
    except httpx.HTTPError as error:
        failures.append(f"{type(error).__name__}: {error}")
        return math.inf
    took = time.perf_counter() - started
    if answer.status_code != 200 or took >= PROBE_TIMEOUT:
        failures.append(f"status {answer.status_code} after {took * 1000:.0f} ms")
        return math.inf
    return took


def _figures(name: str, took: list[float]) -> str:
    if not took:
        return f"{name}: no probe"
    return (
        f"{name}: {len(took)} probes, median {statistics.median(took) * 1000:.1f} ms,"
        f" max {max(took) * 1000:.1f} ms"
    )


@contextlib.contextmanager
def healthz_watch(
    base_url: str, *, interval: float = 0.05, after: int = 10
) -> Iterator[dict[str, list[float]]]:
    """Probe ``base_url``'s ``/healthz`` from ``WATCHERS`` threads, each on
    a connection of its own, every ``interval`` seconds while the block runs
    (once each at least),
    then ``after`` times more once it is done; then assert that every probe
    answered 200 within ``PROBE_TIMEOUT`` and that the median of each part
    is under ``HEALTHZ_MEDIAN``. Yields the latencies in seconds (``during``
    and ``after``), filled as they are taken. A block that raises is left
    to raise, with the probes' figures so far as a note."""
    took: dict[str, list[float]] = {"during": [], "after": []}
    failures: list[str] = []
    stop = threading.Event()
    with contextlib.ExitStack() as closing:
        clients = [
            closing.enter_context(httpx.Client(base_url=base_url, timeout=PROBE_TIMEOUT))
            for _ in range(WATCHERS)
        ]

        def watch(client: httpx.Client) -> None:
            while True:
                took["during"].append(_probe(client, failures))
                if stop.wait(interval):
                    return

        watchers = [
            threading.Thread(target=watch, args=(client,), name="healthz-watch", daemon=True)
            for client in clients
        ]
        for watcher in watchers:
            watcher.start()
        started = time.perf_counter()
        try:
            yield took
        except BaseException as error:
            so_far = _figures("during", took["during"])
            error.add_note(f"/healthz meanwhile: {so_far} {failures[:5]}")
            raise
        finally:
            lasted = time.perf_counter() - started
            stop.set()
            for watcher in watchers:
                watcher.join(PROBE_TIMEOUT + 5)
        for _ in range(after):
            took["after"].append(_probe(clients[0], failures))
            time.sleep(interval)
    report = "; ".join(
        [
            f"the block lasted {lasted * 1000:.0f} ms",
            _figures("during", took["during"]),
            _figures("after", took["after"]),
        ]
    )
    print(f"/healthz {report}")  # shown with ``-rP``: the figures of a passing test
    assert not failures, f"/healthz did not answer 200 every time ({report}): {failures[:5]}"
    assert not any(w.is_alive() for w in watchers), f"a /healthz probe never returned ({report})"
    for part in ("during", "after"):
        if took[part]:
            median = statistics.median(took[part])
            assert median < HEALTHZ_MEDIAN, f"/healthz's median {part} is too slow: {report}"
