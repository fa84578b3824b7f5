"""Celery tasks of the console: each takes ids (or nothing) and calls one
domain function. The backend health check lives here because it also
writes the console's health history."""

from celery import shared_task


@shared_task
def check_backends() -> int:
    """Check every enabled backend (updating its health) and record each
    result in the history the backend page shows."""
    from console.health import backends_check_recorded

    return backends_check_recorded()


@shared_task
def purge_health_history() -> int:
    from console.health import health_history_purge

    return health_history_purge()
