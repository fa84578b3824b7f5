"""Backend checks that leave a history (the backend page shows it)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from accounts.audit import Actor, audit_record
from console.models import BackendHealthCheck
from responses_api.backends.health import Probe, backend_check
from responses_api.catalogue import catalog
from responses_api.models import Backend

HISTORY_DAYS = 7


def backend_check_recorded(
    *, backend: Backend, source: str = BackendHealthCheck.Source.SCHEDULE
) -> tuple[Probe, BackendHealthCheck]:
    """Check the backend now (updating its health), and record the result."""
    result = backend_check(backend=backend)
    check = BackendHealthCheck.objects.create(
        backend=backend,
        ok=result.ok,
        latency_ms=result.latency_ms,
        version=result.version,
        reported_models=result.models,
        error=result.error,
        source=source,
    )
    return result, check


def backends_check_recorded() -> int:
    """The scheduled check: every enabled backend, each result recorded."""
    checked = 0
    for backend in Backend.objects.filter(enabled=True):
        backend_check_recorded(backend=backend)
        checked += 1
    return checked


def backend_connection_test(*, backend: Backend, actor: Actor) -> tuple[Probe, BackendHealthCheck]:
    """ "Test connection": check now, record it, and say who asked."""
    result, check = backend_check_recorded(
        backend=backend, source=BackendHealthCheck.Source.CONSOLE
    )
    catalog.forget(backend.organisation_id)
    audit_record(
        organisation=backend.organisation,
        actor=actor,
        action="backend.test",
        target=backend.name,
        details={"backend_id": str(backend.id), "ok": result.ok, "latency_ms": result.latency_ms},
    )
    return result, check


def health_history_purge(*, older_than_days: int = HISTORY_DAYS) -> int:
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = BackendHealthCheck.objects.filter(checked_at__lt=cutoff).delete()
    return deleted
