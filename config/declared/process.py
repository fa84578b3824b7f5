"""Production mode, the web's security, logging, metrics, encryption at
rest and traces."""

from __future__ import annotations

from config.declared.spec import (
    ALL,
    COMMANDS,
    CONFIG,
    SECRET_FILE,
    UPSTREAM,
    WEB,
    WORKER,
    Derived,
    Setting,
)

TITLE = "Production, security and logging"

SETTINGS = (
    Setting(
        "SWITCHYARD_PRODUCTION",
        "bool",
        False,
        "Refuse to start unless `SECRET_KEY`, `DATABASE_URL`, `REDIS_URL`, "
        "`SWITCHYARD_ENCRYPTION_KEY` and `ALLOWED_HOSTS` are set (one error naming all that are "
        "missing); also refuses `DEBUG=true`, a `SECRET_KEY` under 50 characters, a `*` in "
        "`ALLOWED_HOSTS`, a SQLite `DATABASE_URL` and a malformed encryption key.",
        ALL,
        placement=CONFIG,
    ),
    Setting(
        "SECRET_KEY",
        "str",
        "switchyard-embedded-default-not-for-production",
        "Django's signing key (sessions, CSRF, password reset links); the encryption key is "
        "derived from it when `SWITCHYARD_ENCRYPTION_KEY` is unset.",
        ALL,
        secret=True,
        placement=SECRET_FILE,
        shown_default="a development key (refused in production)",
    ),
    Setting(
        "DEBUG",
        "bool",
        False,
        "Django's debug mode: never `true` in production, where it is refused.",
        ALL,
        placement=CONFIG,
    ),
    Setting(
        "ALLOWED_HOSTS",
        "list",
        ("127.0.0.1", "localhost", "[::1]", "testserver"),
        "Comma-separated host names the web process serves; keep `localhost` on Kubernetes "
        "for the probes.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "CSRF_TRUSTED_ORIGINS",
        "list",
        (),
        "Comma-separated origins the console's forms may be posted from, e.g. "
        "`https://switchyard.example.com`.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_PUBLIC_URL",
        "url",
        "http://127.0.0.1:8000",
        "Where clients reach Switchyard (`scheme://host[:port]`, no `/v1`): written into the "
        "Codex files that `manage.py codex_config` and the console generate.",
        (WEB, COMMANDS),
    ),
    Setting(
        "SWITCHYARD_BEHIND_TLS",
        "bool",
        False,
        "TLS is terminated in front of the web processes: trust the proxy's "
        "`X-Forwarded-Proto`, make cookies secure and turn HSTS on (1 year, subdomains, "
        "preload).",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SECURE_SSL_REDIRECT",
        "bool",
        False,
        "Redirect plain HTTP to HTTPS; `/healthz`, `/readyz` and `/metrics` are never redirected.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SECURE_COOKIES",
        "bool",
        Derived("`true` with `SWITCHYARD_BEHIND_TLS` or `SECURE_SSL_REDIRECT`"),
        "Send the session and CSRF cookies over HTTPS only.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SECURE_HSTS_SECONDS",
        "int",
        Derived(
            "`31536000` (1 year) with `SWITCHYARD_BEHIND_TLS` or `SECURE_SSL_REDIRECT`, else `0`"
        ),
        "The `Strict-Transport-Security` header's max-age; `0` sends no header.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "bool",
        True,
        "The HSTS header also covers subdomains.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SECURE_HSTS_PRELOAD",
        "bool",
        Derived("`true` when `SECURE_HSTS_SECONDS` is above 0"),
        "The HSTS header allows a submission to the browsers' preload list; nothing happens "
        "until someone submits the domain.",
        (WEB,),
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_PASSWORD_HASHERS",
        "str",
        "default",
        "`fast` swaps the deliberately slow password hash for MD5, for test runs; refused in "
        "production.",
        (WEB, COMMANDS),
        choices=("default", "fast"),
    ),
    Setting(
        "WHITENOISE_USE_FINDERS",
        "bool",
        Derived("`true` unless `SWITCHYARD_PRODUCTION`"),
        "Serve static files from the apps themselves, without `collectstatic`.",
        (WEB,),
        placement="—",
    ),
    Setting(
        "LOG_LEVEL",
        "str",
        "INFO",
        "The root log level (`DEBUG`, `INFO`, `WARNING`, ...).",
        ALL,
        case="upper",
        placement=CONFIG,
    ),
    Setting(
        "LOG_FORMAT",
        "str",
        Derived("`text`; `json` with `SWITCHYARD_PRODUCTION`"),
        "`json`: one JSON object per line, each API request one line (logger "
        "`switchyard.requests`); `text`: readable lines.",
        ALL,
        choices=("json", "text"),
        case="lower",
        placement=CONFIG,
    ),
    Setting(
        "METRICS_TOKEN",
        "str",
        "",
        "Bearer token for Prometheus scrapes of `/metrics`; unset, `/metrics` answers 404, and "
        "a scrape without it gets 401.",
        (WEB,),
        secret=True,
        placement=SECRET_FILE,
        shown_default="unset (`/metrics` answers 404)",
    ),
    Setting(
        "PROMETHEUS_MULTIPROC_DIR",
        "str",
        "",
        "A directory shared by several web processes behind one scrape address, where each "
        "writes its metrics (docs/operations/metrics.md).",
        (WEB,),
        placement="env file (one machine)",
    ),
    Setting(
        "SWITCHYARD_ENCRYPTION_KEY",
        "str",
        "",
        "Fernet keys, comma-separated, that encrypt upstream API keys and stored responses at "
        "rest: the first encrypts, all decrypt. Back it up: without it they cannot be "
        "decrypted.",
        (*UPSTREAM, COMMANDS),
        secret=True,
        placement=SECRET_FILE,
        shown_default="derived from `SECRET_KEY`",
    ),
    Setting(
        "SWITCHYARD_ENCRYPTION_KEYS_OLD",
        "str",
        "",
        "Fernet keys being retired, comma-separated: they still decrypt, never encrypt "
        "(docs/operations/backups.md).",
        (*UPSTREAM, COMMANDS),
        secret=True,
        placement=SECRET_FILE,
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "url",
        "",
        "An OTLP/HTTP collector, e.g. `http://otel-collector:4318`: API requests are traced "
        "when it (or the traces-only endpoint) is set (docs/operations/traces.md).",
        (WEB, WORKER),
        shown_default="unset (no traces)",
        placement=CONFIG,
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "url",
        "",
        "The collector's address for traces alone; it also turns tracing on.",
        (WEB, WORKER),
    ),
    Setting(
        "OTEL_SDK_DISABLED",
        "bool",
        False,
        "`true` turns tracing off even with an endpoint set.",
        (WEB, WORKER),
    ),
)

# Read by the OpenTelemetry SDK itself, from the environment only.
OPENTELEMETRY = (
    Setting(
        "OTEL_EXPORTER_OTLP_HEADERS",
        "str",
        "",
        "Headers for the trace collector, e.g. `authorization=Bearer%20TOKEN` for a hosted "
        "one. Read by the OpenTelemetry SDK from the environment only (no `_FILE` form): on "
        "machines it goes in `/etc/switchyard/secrets.env`.",
        (WEB, WORKER),
        secret=True,
        reader="opentelemetry",
        placement="Secret / `secrets.env`",
    ),
)
