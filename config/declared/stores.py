"""PostgreSQL, Redis, Celery and the usage queue."""

from __future__ import annotations

from config.declared.spec import (
    ALL,
    BEAT,
    CONFIG,
    MIGRATE,
    SECRET_ENV,
    SECRET_FILE,
    USAGE,
    WEB,
    WORKER,
    Derived,
    Setting,
)

TITLE = "Database, Redis and Celery"

SETTINGS = (
    Setting(
        "DATABASE_URL",
        "url",
        Derived("the SQLite file `db.sqlite3` in the project folder"),
        "The database: PostgreSQL in production, `postgres://USER:PASSWORD@HOST:5432/DB`.",
        ALL,
        secret=True,
        placement=SECRET_FILE,
    ),
    Setting(
        "SWITCHYARD_MIGRATE_DATABASE_URL",
        "url",
        "",
        "The database `manage.py migrate` (and its `--check`) alone uses: PostgreSQL directly "
        "when `DATABASE_URL` is PgBouncer's (docs/operations/postgresql.md).",
        (MIGRATE,),
        secret=True,
        placement=SECRET_ENV,
        shown_default="`DATABASE_URL`",
    ),
    Setting(
        "SWITCHYARD_PGBOUNCER",
        "bool",
        False,
        "`true` when `DATABASE_URL` is PgBouncer in transaction pooling: no server-side "
        "cursors, no prepared statements.",
        ALL,
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_ALLOW_SQLITE",
        "bool",
        False,
        "Let production run on a SQLite `DATABASE_URL`, for a single-process installation.",
        ALL,
    ),
    Setting(
        "DB_CONN_MAX_AGE",
        "int",
        60,
        "Seconds a database connection is kept for reuse (always `0` on SQLite).",
        ALL,
    ),
    Setting(
        "REDIS_URL",
        "url",
        "",
        "Cache, rate limits, usage queue and Celery broker: `redis://:PASSWORD@HOST:6379/0`, "
        "`rediss://…` (TLS), `unix:///path/redis.sock?db=0` or "
        "`redis+sentinel://:PASSWORD@HOST1:26379,HOST2:26379/SERVICE/0`.",
        ALL,
        secret=True,
        placement=SECRET_FILE,
        shown_default="unset (in-process: one process only)",
    ),
    Setting(
        "SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS",
        "float",
        2.0,
        "How long connecting to Redis may take before the call fails as an outage (a 503 for "
        "a request).",
        ALL,
    ),
    Setting(
        "SWITCHYARD_REDIS_TIMEOUT_SECONDS",
        "float",
        2.0,
        "How long waiting for any answer of Redis may take before the call fails as an outage.",
        ALL,
    ),
    Setting(
        "CELERY_TASK_ALWAYS_EAGER",
        "bool",
        False,
        "Run Celery tasks in the calling process even with Redis; always so without `REDIS_URL`.",
        (WEB, WORKER, BEAT),
    ),
    Setting(
        "SWITCHYARD_USAGE_DRAIN_SECONDS",
        "float",
        5.0,
        "The period of Celery beat's usage drain, which writes the usage rows web processes "
        "leave to Celery: it bounds how late a row reaches the database.",
        (BEAT,),
    ),
    Setting(
        "SWITCHYARD_USAGE_DRAIN_IN_WEB",
        "bool",
        True,
        "With Redis, web processes also write the usage rows they queue; `false` leaves that "
        "to `manage.py write_usage` and the Celery drain.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_USAGE_STREAM",
        "str",
        "switchyard:usage",
        "The Redis stream usage rows are queued on before they are written.",
        (WEB, WORKER, USAGE),
    ),
    Setting(
        "SWITCHYARD_USAGE_PENDING_MAX",
        "int",
        10_000,
        "How many usage rows a web process holds in memory while Redis is out before it "
        "refuses new requests.",
        (WEB,),
    ),
)
