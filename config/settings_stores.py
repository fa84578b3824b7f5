"""Settings for the shared stores: Redis (cache, Celery's broker) and
PostgreSQL behind PgBouncer. Kept apart from ``settings.py`` so that the
derivations can be read, and tested, on their own."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from config.declared.environment import read

# How Django's management commands are started.
MANAGE = {"manage.py", "django-admin"}


def redis_timeouts() -> tuple[float, float]:
    """How long connecting to Redis, and waiting for any of its answers, may
    take: ``SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS`` and
    ``SWITCHYARD_REDIS_TIMEOUT_SECONDS``. A Redis that accepts connections and
    never answers then fails the call, handled as an outage, instead of
    holding it for ever."""
    return (
        read("SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS"),
        read("SWITCHYARD_REDIS_TIMEOUT_SECONDS"),
    )


def redis_config(
    url: str, timeouts: tuple[float, float] | None = None
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """``CACHES``, Celery's broker URL and its transport options for
    ``REDIS_URL``: any of redis://, rediss://, unix:// and redis+sentinel://,
    in the spelling each client expects (responses_api/runtime/redis_urls.py);
    the cache's connections bounded by ``timeouts`` (:func:`redis_timeouts`:
    connecting, then waiting for an answer).
    Without Redis, a process-local cache and an in-memory broker."""
    if not url:
        return (
            {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
            ("memory://"),
            {},
        )
    from responses_api.runtime.redis_urls import cache_options, celery_broker

    caches = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "OPTIONS": {**cache_options(url), **_socket_timeouts(timeouts)},
        }
    }
    broker, options = celery_broker(url)
    return caches, broker, options


def _socket_timeouts(timeouts: tuple[float, float] | None) -> dict[str, float]:
    if timeouts is None:
        return {}
    connect, answer = timeouts
    return {"socket_connect_timeout": connect, "socket_timeout": answer}


def database_url(sqlite: Path, argv: Sequence[str] | None = None) -> str:
    """``DATABASE_URL``; for ``manage.py migrate`` ``SWITCHYARD_MIGRATE_DATABASE_URL``
    instead, when set. Behind PgBouncer in transaction pooling a migration's
    locks and its session settings may land on different server connections,
    so migrations take a direct address of their own, which no other command
    and no server process reads (docs/operations/postgresql.md). Neither
    set: the embedded SQLite file ``sqlite``."""
    argv = sys.argv if argv is None else argv
    command = argv[1] if len(argv) > 1 and Path(argv[0]).name in MANAGE else ""
    migrate = read("SWITCHYARD_MIGRATE_DATABASE_URL") if command == "migrate" else None
    return migrate or read("DATABASE_URL", default=f"sqlite:///{sqlite}")


def behind_pgbouncer(database: dict[str, Any]) -> None:
    """Make ``database`` safe behind PgBouncer in transaction pooling, where
    consecutive transactions of one client may run on different server
    connections: nothing may outlive a transaction on the server.

    * Server-side cursors: Django declares them ``WITH HOLD`` outside a
      transaction and fetches from them later, maybe from another server
      connection; off, ``.iterator()`` reads the whole result at once.
    * Prepared statements: psycopg prepares a query it has run five times,
      on the server connection of the moment; off.
    Persistent connections (``CONN_MAX_AGE``) stay: they are connections to
    PgBouncer, which hands out a server connection per transaction."""
    if not database["ENGINE"].endswith("postgresql"):
        raise ImproperlyConfigured("SWITCHYARD_PGBOUNCER=true needs a postgres:// DATABASE_URL.")
    database["DISABLE_SERVER_SIDE_CURSORS"] = True
    database.setdefault("OPTIONS", {})["prepare_threshold"] = None


def beat_schedule(usage_drain: float) -> dict[str, dict[str, Any]]:
    """What Celery beat sends, and how often (in seconds). The usage drain
    writes the rows of web processes that leave that to Celery
    (``SWITCHYARD_USAGE_DRAIN_IN_WEB=false``): its period bounds how late a
    row reaches the database."""
    return {
        "backend-health": {"task": "console.tasks.check_backends", "schedule": 15.0},
        "usage-drain": {"task": "responses_api.tasks.drain_usage", "schedule": usage_drain},
        "stored-responses-purge": {
            "task": "responses_api.tasks.purge_stored_responses",
            "schedule": 300.0,
        },
        "health-history-purge": {
            "task": "console.tasks.purge_health_history",
            "schedule": 3600.0,
        },
        "usage-purge": {"task": "responses_api.tasks.purge_usage", "schedule": 3600.0},
        "file-orphans-purge": {
            "task": "responses_api.tasks.purge_file_orphans",
            "schedule": 86400.0,
        },
        "background-reap": {
            "task": "responses_api.tasks.reap_background_responses",
            "schedule": 15.0,
        },
    }
