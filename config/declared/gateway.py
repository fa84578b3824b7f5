"""The gateway: upstream timeouts, request bounds, WebSockets, background
responses, per-process caches, draining and the management API."""

from __future__ import annotations

from config.declared.spec import (
    COMMANDS,
    CONFIG,
    UPSTREAM,
    WEB,
    WORKER,
    Derived,
    Setting,
)

TITLE = "Gateway"

SETTINGS = (
    Setting(
        "SWITCHYARD_CONNECT_TIMEOUT",
        "float",
        5.0,
        "Seconds to connect to an upstream backend.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_READ_TIMEOUT",
        "float",
        600.0,
        "Seconds an upstream backend may stay silent while it answers.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_FIRST_TOKEN_TIMEOUT",
        "float",
        120.0,
        "Seconds a non-streamed request waits for the backend's first token before a 504 (a "
        "model's `first_token_timeout` takes precedence).",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_QUEUE_TIMEOUT",
        "float",
        30.0,
        "Seconds a request may wait for a free backend slot before a 503.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_KEEPALIVE_SECONDS",
        "float",
        10.0,
        "Interval of the repeated `response.in_progress` events while a stream waits.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_BACKEND_ALLOW_PRIVATE",
        "bool",
        Derived("`true`; `false` with `SWITCHYARD_PRODUCTION`"),
        "Backends may sit on loopback, private, CGNAT and other non-public addresses; "
        "link-local and cloud metadata addresses stay refused either way "
        "(docs/admin/backends.md).",
        (*UPSTREAM, COMMANDS),
    ),
    Setting(
        "SWITCHYARD_MAX_BODY_BYTES",
        "int",
        16 * 1024 * 1024,
        "Largest request body accepted: larger ones get a 413, before the body is read when "
        "`Content-Length` says so; a gzip or zstd body is held to it once decoded.",
        (WEB,),
        shown_default="`16777216` (16 MiB)",
    ),
    Setting(
        "SWITCHYARD_BODY_TIMEOUT_SECONDS",
        "float",
        30.0,
        "A request body not complete this long after its headers gets a 408 and the "
        "connection is closed.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_HEADER_TIMEOUT_SECONDS",
        "float",
        30.0,
        "A request's line and headers must be complete this long after its connection opened "
        "(or after a kept-alive connection's next first byte), else the connection is closed.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_CLIENT_STALL_SECONDS",
        "float",
        60.0,
        "A client that reads nothing of its response for this long while the server's write "
        "buffer is full is disconnected, and its request ends as a 499.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_SERVER_PATCHES",
        "str",
        None,
        "Which of daphne's protecting patches apply: `all`, `none`, names, or `-names` to drop "
        "some (docs/operations/limits.md).",
        (WEB,),
        shown_default="unset (all)",
    ),
    Setting(
        "SWITCHYARD_WEBSOCKET_MAX_SECONDS",
        "float",
        3600.0,
        "How long a WebSocket may stay open before it gets `websocket_connection_limit_reached` "
        "and is closed.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_WEBSOCKETS_PER_KEY",
        "int",
        64,
        "Open WebSockets per API key, across web processes with Redis (`0`: no bound).",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_WEBSOCKETS_PER_ORGANISATION",
        "int",
        256,
        "Open WebSockets per organisation, across web processes with Redis (`0`: no bound).",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_BACKGROUND_RUNNER",
        "str",
        "",
        "Where background responses run: `celery` (a Celery worker) or `local` (a thread of "
        "the web process).",
        (WEB,),
        shown_default="`celery` with `REDIS_URL`, else `local`",
    ),
    Setting(
        "SWITCHYARD_BACKGROUND_TTL_SECONDS",
        "int",
        86400,
        "How long a background response's events are kept.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_BACKGROUND_LEASE_SECONDS",
        "float",
        10.0,
        "How long a silent worker is trusted before its background response is failed.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_BACKGROUND_FOLLOW_SECONDS",
        "int",
        3600,
        "How long one request follows a background response's events before its stream ends "
        "(the client resumes with `starting_after`).",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_BACKGROUND_LOCAL_CONCURRENCY",
        "int",
        8,
        "How many background responses the web process's own worker (`local`) runs at once; "
        "the others wait queued.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_AUTH_CACHE_SECONDS",
        "float",
        5.0,
        "How long a process caches an API key: bounds how long a revocation takes to reach "
        "every process.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_CATALOG_CACHE_SECONDS",
        "float",
        5.0,
        "How long a process caches an organisation's models and backends.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_SHUTDOWN_GRACE_SECONDS",
        "float",
        30.0,
        "After SIGTERM, how long a web process lets in-flight exchanges finish before those "
        "still running are ended (`response.failed`).",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_READY_GRACE_SECONDS",
        "float",
        30.0,
        "How long `/readyz` stays 200 (`degraded`) into a database or Redis outage; 503 after.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_ADMIN_API_RATE",
        "str",
        "600/min",
        "Requests per admin key to the management API, in DRF's rate syntax (`N/s`, `N/min`, "
        "`N/hour`, `N/day`).",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_SCIM_DEPROVISION_KEYS",
        "str",
        "revoke",
        "What happens to the API and admin keys a person created when SCIM deprovisions them: "
        "`revoke`, or `transfer` to the organisation's first owner (docs/admin/scim.md).",
        (WEB,),
        choices=("revoke", "transfer"),
    ),
    Setting(
        "SWITCHYARD_TEST_RATE_LIMIT_NOW",
        "float",
        None,
        "For tests only: an instant (Unix seconds) the rate limiter takes for now, so that its "
        "windows stand still. Refused in production.",
        (WEB, WORKER),
    ),
)
