"""Backend health checks: ``GET {base_url}/models`` with a timeout, and the
load a backend reports (``signals``: vLLM's metrics, llama-server's slots),
kept for routing.

A backend goes offline after ``FAILURES_TO_OFFLINE`` consecutive failures and
back online after one success. A probe obeys the backend's address policy
like its chat calls, and what it reports (the row's ``last_error``, the
console's and the management API's check) never quotes what answered: an
organisation admin who points a backend at some other service learns the
status and a fixed reason, and models and a version only from a well-formed
model list. Between checks, requests that cannot connect
mark a backend *suspect* at once (``routing.Router.mark_suspect``, shared
through Redis), so other requests avoid it without waiting for this task; a
successful check lifts the mark.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from responses_api.backends.client import (
    BackendAddressRefused,
    BackendDisconnected,
    BackendError,
    BackendTimeout,
    BackendUnreachable,
    get,
)
from responses_api.backends.routing import clear_suspect_sync, keep_signals_sync
from responses_api.backends.scoring import Signals
from responses_api.backends.signals import poll_signals
from responses_api.catalogue import catalog
from responses_api.catalogue.addresses import AddressPolicy, backend_policy
from responses_api.models import Backend
from responses_api.runtime.secrets import decrypt

FAILURES_TO_OFFLINE = 2
TIMEOUT = 5.0


@dataclass(slots=True)
class Probe:
    ok: bool
    latency_ms: float | None
    models: list[str]
    version: str
    error: str
    # What the backend says of its load (``signals``), when it says anything.
    signals: Signals | None = None


def probe(
    base_url: str,
    api_key: str = "",
    timeout: float = TIMEOUT,
    *,
    dialect: str = "",
    allow_private: bool = False,
) -> Probe:
    """Check a backend now, from sync code (a Celery task, a console view).
    ``allow_private`` is the backend's own flag (``backends.addresses``)."""
    policy = backend_policy(allow_private=allow_private)
    return asyncio.run(probe_async(base_url, api_key, timeout, dialect=dialect, policy=policy))


# What a failed probe says, by the class of failure: never the exception's
# own text, which can quote the bytes a non-HTTP service sent.
_REASONS: tuple[tuple[type[BackendError], str], ...] = (
    (BackendUnreachable, "the connection could not be made"),
    (BackendTimeout, "no answer in time"),
    (BackendDisconnected, "the connection broke, or the answer was not HTTP"),
)


def _failure(exc: BackendError) -> str:
    if isinstance(exc, BackendAddressRefused):
        return str(exc)
    reason = next((r for cls, r in _REASONS if isinstance(exc, cls)), "the check failed")
    return f"{type(exc).__name__}: {reason}."


async def probe_async(
    base_url: str,
    api_key: str = "",
    within: float = TIMEOUT,
    *,
    dialect: str = "",
    policy: AddressPolicy | None = None,
) -> Probe:
    started = time.perf_counter()
    try:
        status, data, version = await get(
            base_url, "/models", api_key=api_key, within=within, policy=policy
        )
    except BackendError as exc:
        return Probe(False, None, [], "", _failure(exc))
    latency = (time.perf_counter() - started) * 1000
    if status != 200:
        return Probe(False, latency, [], "", f"HTTP {status}")
    if not isinstance(data, dict) or not isinstance(data.get("data", []), list):
        return Probe(False, latency, [], "", "the backend's /models answer is not a model list")
    models = [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]
    version = await _server_version(dialect, base_url, api_key, within, policy) or version
    signals = await poll_signals(dialect, base_url, api_key, within, policy)
    return Probe(True, latency, models, version[:200], "", signals)


# Where a server says its version, beside /v1 rather than under it: the
# page, the field and the name to give it. llama-server answers /v1/models
# with only `server: llama.cpp`; its build ("b1-0c1e570", also the chat
# `system_fingerprint`) is `build_info` in /props. vLLM's /v1/models names
# no version and its `server` header is "uvicorn"; /version answers
# {"version": "0.32.0"}.
_VERSION_PAGES = {
    "llamacpp": ("/props", "build_info", "llama.cpp"),
    "vllm": ("/version", "version", "vLLM"),
}


async def _server_version(
    dialect: str, base_url: str, api_key: str, within: float, policy: AddressPolicy | None
) -> str:
    if dialect not in _VERSION_PAGES:
        return ""
    page, field, name = _VERSION_PAGES[dialect]
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        status, data, _ = await get(root, page, api_key=api_key, within=within, policy=policy)
    except BackendError:
        return ""
    found = data.get(field) if status == 200 and isinstance(data, dict) else None
    return f"{name} {found}" if isinstance(found, str) and found else ""


def backend_check(*, backend: Backend) -> Probe:
    result = probe(
        backend.base_url,
        decrypt(backend.api_key_encrypted),
        dialect=backend.dialect,
        allow_private=backend.allow_private,
    )
    backend.last_checked_at = timezone.now()
    if result.ok:
        backend.health = Backend.Health.ONLINE
        backend.consecutive_failures = 0
        backend.latency_ms = result.latency_ms
        backend.reported_models = result.models
        if result.version:
            backend.version = result.version
        backend.last_error = ""
        clear_suspect_sync(str(backend.id))
        keep_signals_sync(str(backend.id), result.signals)
    else:
        backend.consecutive_failures += 1
        backend.last_error = result.error
        if backend.consecutive_failures >= FAILURES_TO_OFFLINE:
            backend.health = Backend.Health.OFFLINE
            keep_signals_sync(str(backend.id), None)
    backend.save(
        update_fields=[
            "last_checked_at",
            "health",
            "consecutive_failures",
            "latency_ms",
            "reported_models",
            "version",
            "last_error",
        ]
    )
    catalog.forget()
    return result


class BackendHealthCollector:
    """``switchyard_backend_up`` per backend, read from the database at scrape time."""

    def collect(self):
        family = GaugeMetricFamily(
            "switchyard_backend_up",
            "1 when the last health check found the backend online, 0 otherwise; "
            "-1 for disabled backends.",
            labels=["backend", "backend_id", "organisation"],
        )
        rows = Backend.objects.values_list("id", "name", "organisation__slug", "health", "enabled")
        for backend_id, name, organisation, health, enabled in rows:
            value = -1.0 if not enabled else 1.0 if health == Backend.Health.ONLINE else 0.0
            family.add_metric([name, str(backend_id), organisation or ""], value)
        yield family
