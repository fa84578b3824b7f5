"""Prometheus metrics (``GET /metrics``, docs/operations/metrics.md), with the official client.

Per-request metrics are recorded in one place, :func:`request_observe`, when
the usage row is submitted (``relay.Exchange.submit``): a handful of counter
and histogram updates per request, nothing per token. In-flight counts move
with the router's leases; backend health is read from the database at scrape
time, so every process reports the same (the Celery health task writes it).

Several processes behind one scrape address (systemd units behind nginx) share
``PROMETHEUS_MULTIPROC_DIR``: the client then keeps values in files there and
:func:`exposition` merges them. The directory must be empty when the processes
start (see docs/operations/metrics.md). On Kubernetes each pod is scraped on its own
and needs none of that.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

REQUESTS = Counter(
    "switchyard_requests",
    "Authenticated API requests by model, backend and final status (499: client gone).",
    ["model", "backend", "status"],
)
TOKENS = Counter(
    "switchyard_tokens",
    "Tokens by direction: input, cached (part of input), output, reasoning (part of output).",
    ["model", "backend", "kind"],
)
TIME_TO_FIRST_TOKEN = Histogram(
    "switchyard_time_to_first_token_seconds",
    "From the request's arrival to the first token from the backend.",
    ["model", "backend"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
DURATION = Histogram(
    "switchyard_request_duration_seconds",
    "From the request's arrival to its end (last byte, error or disconnect).",
    ["model", "backend", "stream"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
QUEUE_WAIT = Histogram(
    "switchyard_queue_wait_seconds",
    "Time spent waiting for a backend slot (every backend at its concurrency limit).",
    ["model"],
    buckets=(0.001, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30),
)
STORED_WRITES = Counter(
    "switchyard_stored_response_writes",
    "Stored responses written, by where: from the event loop, or from the worker "
    "thread when the loop could not (SQLite held by another writer, PostgreSQL "
    "unreachable from the loop).",
    ["where"],
)
RATE_LIMITED = Counter(
    "switchyard_rate_limited",
    "Requests answered 429, by error code (key/organisation limits or a backend's).",
    ["model", "code"],
)
UNAUTHENTICATED = Counter(
    "switchyard_unauthenticated_requests",
    "Requests refused before authentication (no usage row), by reason: the error code "
    "answered (invalid_api_key, unknown_url, method_not_allowed, server_shutting_down).",
    ["reason"],
)
USAGE_DEAD_LETTERS = Counter(
    "switchyard_usage_dead_letters",
    "Usage rows the database refused, kept as dead letters (manage.py usage_deadletters), "
    "by reason: the class of the database's error.",
    ["reason"],
)
IN_FLIGHT = Gauge(
    "switchyard_backend_in_flight",
    "Requests currently holding a slot on a backend.",
    ["backend"],
    multiprocess_mode="livesum",
)


class _Series:
    """The labelled series of one (model, backend) pair, looked up once:
    ``labels()`` takes a lock and builds a key per call."""

    __slots__ = ("duration", "queue_wait", "requests", "tokens", "ttft")

    def __init__(self, model: str, backend: str) -> None:
        self.requests: dict[int, Any] = {}
        kinds = ("input", "cached", "output", "reasoning")
        self.tokens = tuple(TOKENS.labels(model, backend, kind) for kind in kinds)
        self.ttft = TIME_TO_FIRST_TOKEN.labels(model, backend)
        self.duration = (
            DURATION.labels(model, backend, "false"),
            DURATION.labels(model, backend, "true"),
        )
        self.queue_wait = QUEUE_WAIT.labels(model)


_series: dict[tuple[str, str], _Series] = {}
# Model names in rows come from requests (an unknown model is a 404 row too):
# bound the lookup table; the series themselves live in the registry.
_SERIES_CACHED = 1000


def request_observe(*, row: dict[str, Any]) -> None:
    """Record one finished request from its usage row."""
    model = row.get("model") or ""
    backend = row.get("backend_name") or ""
    series = _series.get((model, backend))
    if series is None:
        if len(_series) >= _SERIES_CACHED:
            _series.clear()
        series = _series[(model, backend)] = _Series(model, backend)
    status = int(row.get("status") or 0)
    counter = series.requests.get(status)
    if counter is None:
        counter = series.requests[status] = REQUESTS.labels(model, backend, str(status))
    counter.inc()
    for child, field in zip(
        series.tokens,
        ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens"),
        strict=True,
    ):
        count = row.get(field)
        # A counter refuses a negative step: a count is never one, whatever
        # reached the row.
        if count and count > 0:
            child.inc(count)
    if row.get("ttft_ms") is not None:
        series.ttft.observe(row["ttft_ms"] / 1000)
    if row.get("duration_ms") is not None:
        series.duration[bool(row.get("stream"))].observe(row["duration_ms"] / 1000)
    if row.get("queue_wait_ms") is not None:
        series.queue_wait.observe(row["queue_wait_ms"] / 1000)
    if status == 429:
        RATE_LIMITED.labels(model, row.get("error_code") or "").inc()


_unauthenticated: dict[str, Any] = {}


def unauthenticated_observe(*, reason: str) -> None:
    """Count one request refused before authentication. ``reason`` is an
    error code of the platform's, so the series stay few."""
    counter = _unauthenticated.get(reason)
    if counter is None:
        counter = _unauthenticated[reason] = UNAUTHENTICATED.labels(reason)
    counter.inc()


def dead_letter_observe(*, reason: str) -> None:
    """Count one usage row kept as a dead letter."""
    USAGE_DEAD_LETTERS.labels(reason).inc()


_in_flight: dict[str, Any] = {}


def in_flight_add(*, backend: str, delta: int) -> None:
    gauge = _in_flight.get(backend)
    if gauge is None:
        gauge = _in_flight[backend] = IN_FLIGHT.labels(backend)
    gauge.inc(delta)


def multiprocess_dir() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def exposition(*collectors: Any) -> tuple[bytes, str]:
    """The text exposition of this process (or of every process sharing the
    directory), then what ``collectors`` read at scrape time: those read the
    database, which the shared directory cannot hold."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    scraped = CollectorRegistry()
    for collector in collectors:
        scraped.register(collector)
    return generate_latest(registry) + generate_latest(scraped), CONTENT_TYPE_LATEST


def process_exit() -> None:
    """Drop this process's live gauges from the shared directory."""
    if multiprocess_dir():
        mark_process_dead(os.getpid())
