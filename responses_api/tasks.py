"""Celery tasks: each takes ids (or nothing) and calls one domain function."""

from celery import shared_task
from django.conf import settings


@shared_task
def check_backends() -> int:
    from console.health import backend_check_recorded
    from responses_api.models import Backend

    checked = 0
    for backend in Backend.objects.filter(enabled=True):
        # Also records the check for the console's health history.
        backend_check_recorded(backend=backend)
        checked += 1
    return checked


@shared_task
def drain_usage() -> int:
    """Safety net: writes usage rows no web process is draining."""
    if not settings.REDIS_URL:
        return 0
    from responses_api.usage import drain_redis, redis_client

    return drain_redis(redis_client(), consumer="celery")


@shared_task
def purge_health_history() -> int:
    from console.health import health_history_purge

    return health_history_purge()
