"""Switchyard settings, read from the environment.

With no environment at all this is the embedded default (SQLite, in-memory
cache, eager Celery), meant for a first run. Production differs only by
environment variables: ``DATABASE_URL``, ``REDIS_URL``, ``SECRET_KEY`` and
friends; each secret may also be given as ``NAME_FILE`` pointing at a mounted
file.
"""

import os
import warnings
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from config import settings_stores
from config.declared.environment import read, unknown_variables
from config.settings_checks import fernet_refusals, production_refusals
from config.settings_routing import routing_settings
from config.settings_sso import sign_in
from config.settings_stores import beat_schedule, behind_pgbouncer, redis_config, redis_timeouts

BASE_DIR = Path(__file__).resolve().parent.parent

# Every variable is read through its declaration in config/declared/ (type,
# default, who reads it), from which docs/reference/settings.md is written.
# SWITCHYARD_* variables that no declaration names are logged at start-up
# (accounts/apps.py), each with the closest declared name.
SWITCHYARD_UNKNOWN_VARIABLES = unknown_variables(os.environ)

DEBUG = read("DEBUG")
PRODUCTION = read("SWITCHYARD_PRODUCTION")

# In production the embedded defaults are refused, and so are settings given
# but unsafe (config/settings_checks.py).
if PRODUCTION:
    production_refusals(debug=DEBUG)

SECRET_KEY = read("SECRET_KEY")

ALLOWED_HOSTS = read("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = read("CSRF_TRUSTED_ORIGINS")
# Where clients reach Switchyard (scheme://host[:port], no /v1): used in the
# Codex files that `manage.py codex_config` and the console generate.
SWITCHYARD_PUBLIC_URL = read("SWITCHYARD_PUBLIC_URL")

# TLS is terminated in front of the web processes (nginx, an ingress); the
# proxy's X-Forwarded-Proto says whether the client used HTTPS. Trust it only
# when told to: a process reachable directly would let clients forge it.
BEHIND_TLS = read("SWITCHYARD_BEHIND_TLS")
if BEHIND_TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = read("SECURE_SSL_REDIRECT")
# Probes and scrapers talk plain HTTP to the pod; never redirect them.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = read(
    "SECURE_COOKIES", default=BEHIND_TLS or SECURE_SSL_REDIRECT
)
SECURE_HSTS_SECONDS = read(
    "SECURE_HSTS_SECONDS", default=31_536_000 if BEHIND_TLS or SECURE_SSL_REDIRECT else 0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = read("SECURE_HSTS_INCLUDE_SUBDOMAINS")
# The preload directive only allows a submission to the browsers' preload
# list; nothing happens until someone submits the domain.
SECURE_HSTS_PRELOAD = read("SECURE_HSTS_PRELOAD", default=SECURE_HSTS_SECONDS > 0)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "accounts",
    "responses_api",
    "console",
    "admin_api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # /healthz, /readyz, /metrics: for probes and scrapers, whatever their Host.
    "responses_api.views.OperationalEndpoints",
    # Serves the collected static files (console, API docs) from the web
    # process itself: no separate file server on Kubernetes.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.middleware.SecurityHeadersMiddleware",
]

# The Content-Security-Policy of every page Django serves: scripts, styles,
# fonts and fetches from this origin only, no inline script or style (the
# templates keep theirs in static files), never framed. Images may also be
# data: URIs, which Swagger UI's stylesheet uses for its icons on /api/v1/docs.
SWITCHYARD_CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": environ.Env.db_url_config(settings_stores.database_url(BASE_DIR / "db.sqlite3"))
}
DATABASES["default"].setdefault("CONN_MAX_AGE", read("DB_CONN_MAX_AGE"))
# PostgreSQL reached through PgBouncer in transaction pooling (docs/operations/postgresql.md).
if read("SWITCHYARD_PGBOUNCER"):
    behind_pgbouncer(DATABASES["default"])
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # SQLite serialises writers; a generous timeout keeps concurrent usage
    # writes from failing with "database is locked" in the embedded default.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # Transactions take the write lock when they begin: a deferred one that
    # reads, then writes, while another process commits fails at once with
    # "database is locked" instead of waiting (SQLite's deadlock avoidance).
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    # A write-ahead log: readers never wait for the writer, and a commit
    # (a stored response's, before its answer goes out) costs no fsync; a
    # power loss may take back the last commits, as a crash loses the
    # embedded usage writer's last fraction of a second.
    DATABASES["default"]["OPTIONS"]["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
    # A file (the live tests' server processes open it too), one per test
    # run: two runs in one checkout would otherwise create and drop each
    # other's database.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / f".test-db-{os.getpid()}.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = read("REDIS_URL")
SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS, SWITCHYARD_REDIS_TIMEOUT_SECONDS = redis_timeouts()
CACHES, CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = redis_config(
    REDIS_URL, (SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS, SWITCHYARD_REDIS_TIMEOUT_SECONDS)
)
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL or read("CELERY_TASK_ALWAYS_EAGER")
CELERY_TASK_EAGER_PROPAGATES = True
# Two beats may run (one per machine, for failover): each entry is sent by
# the beat that claims its period first, in Redis.
CELERY_BEAT_SCHEDULER = "config.celery:OncePerPeriodScheduler"
# The periodic tasks (config/settings_stores.py); the usage drain's period
# is SWITCHYARD_USAGE_DRAIN_SECONDS.
CELERY_BEAT_SCHEDULE = beat_schedule(read("SWITCHYARD_USAGE_DRAIN_SECONDS"))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# SWITCHYARD_PASSWORD_HASHERS=fast: MD5 for test runs (tests/conftest.py) and
# the servers they start; production refuses it.
_hashers = read("SWITCHYARD_PASSWORD_HASHERS")
if _hashers == "fast":
    if PRODUCTION:
        raise ImproperlyConfigured(
            "SWITCHYARD_PASSWORD_HASHERS=fast is for tests; unset it when SWITCHYARD_PRODUCTION "
            "is set."
        )
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
LOGOUT_REDIRECT_URL = "/console/login/"
# Console sign-in: single sign-on (None when off), passwords (config/settings_sso.py).
SWITCHYARD_SSO, SWITCHYARD_PASSWORD_LOGIN, AUTHENTICATION_BACKENDS = sign_in()

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Static files: collected into STATIC_ROOT at build time (collectstatic) and
# served by WhiteNoise from the web process. Outside production they are also
# found in the apps directly, so a checkout needs no collectstatic.
WHITENOISE_USE_FINDERS = read("WHITENOISE_USE_FINDERS", default=not PRODUCTION)
if WHITENOISE_USE_FINDERS:
    # Without collectstatic there is no STATIC_ROOT yet, and that is fine here.
    warnings.filterwarnings("ignore", message="No directory at: ", category=UserWarning)

# One JSON object per line in production (LOG_FORMAT=json), readable text by
# default. Request lines come from logger ``switchyard.requests``.
LOG_LEVEL = read("LOG_LEVEL")
LOG_FORMAT = read("LOG_FORMAT", default="json" if PRODUCTION else "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"()": "config.logging.TextFormatter"},
        "json": {"()": "config.logging.JsonFormatter"},
    },
    "filters": {
        "permission_denied": {"()": "config.logging.PermissionDeniedWithoutTraceback"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # A 403 in the console is one warning line, not a traceback.
        "django.request": {"filters": ["permission_denied"]},
        "django.channels.server": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        # One line per upstream call would double the request log.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # The hosted tools' client: a search's URL holds the model's query.
        "httpx2": {"level": "WARNING"},
        "httpcore2": {"level": "WARNING"},
    },
}

# /metrics for requests bearing this token, else 404 (docs/operations/metrics.md).
METRICS_TOKEN = read("METRICS_TOKEN")

# --- Switchyard -------------------------------------------------------------
# Fernet keys that encrypt what is kept at rest (config/declared/process.py):
# the first encrypts, every one decrypts; derived from SECRET_KEY when unset.
SWITCHYARD_ENCRYPTION_KEY = read("SWITCHYARD_ENCRYPTION_KEY")
SWITCHYARD_ENCRYPTION_KEYS_OLD = read("SWITCHYARD_ENCRYPTION_KEYS_OLD")
fernet_refusals(
    SWITCHYARD_ENCRYPTION_KEY=SWITCHYARD_ENCRYPTION_KEY,
    SWITCHYARD_ENCRYPTION_KEYS_OLD=SWITCHYARD_ENCRYPTION_KEYS_OLD,
)
# Seconds an API key or model catalogue stays cached in a process: how long a revocation takes.
SWITCHYARD_AUTH_CACHE_SECONDS = read("SWITCHYARD_AUTH_CACHE_SECONDS")
SWITCHYARD_CATALOG_CACHE_SECONDS = read("SWITCHYARD_CATALOG_CACHE_SECONDS")
# For tests only (tests/routing/test_limits.py); refused in production.
SWITCHYARD_TEST_RATE_LIMIT_NOW = read("SWITCHYARD_TEST_RATE_LIMIT_NOW")
if PRODUCTION and SWITCHYARD_TEST_RATE_LIMIT_NOW is not None:
    raise ImproperlyConfigured(
        "SWITCHYARD_TEST_RATE_LIMIT_NOW is for tests; unset it when SWITCHYARD_PRODUCTION is set."
    )
# Upstream timeouts (seconds).
SWITCHYARD_CONNECT_TIMEOUT = read("SWITCHYARD_CONNECT_TIMEOUT")
SWITCHYARD_READ_TIMEOUT = read("SWITCHYARD_READ_TIMEOUT")
# How long a non-streamed request waits for the backend's first token before
# a 504 (a model's own first_token_timeout takes precedence).
SWITCHYARD_FIRST_TOKEN_TIMEOUT = read("SWITCHYARD_FIRST_TOKEN_TIMEOUT")
# Backends on non-public addresses (responses_api/catalogue/addresses.py):
# on in the embedded default, off in production (config/declared/gateway.py).
SWITCHYARD_BACKEND_ALLOW_PRIVATE = read("SWITCHYARD_BACKEND_ALLOW_PRIVATE", default=not PRODUCTION)
# Largest request body accepted, in bytes.
SWITCHYARD_MAX_BODY_BYTES = read("SWITCHYARD_MAX_BODY_BYTES")
# The Files API (docs/api/files.md); the bucket's settings by SWITCHYARD_FILES_S3_<NAME>.
SWITCHYARD_FILES_STORAGE = read("SWITCHYARD_FILES_STORAGE")
SWITCHYARD_FILES_DIR = read("SWITCHYARD_FILES_DIR", default=str(BASE_DIR / "data" / "files"))
SWITCHYARD_FILES_S3 = {
    "bucket": read("SWITCHYARD_FILES_S3_BUCKET"),
    "endpoint_url": read("SWITCHYARD_FILES_S3_ENDPOINT_URL"),
    "region": read("SWITCHYARD_FILES_S3_REGION"),
    "access_key_id": read("SWITCHYARD_FILES_S3_ACCESS_KEY_ID"),
    "secret_access_key": read("SWITCHYARD_FILES_S3_SECRET_ACCESS_KEY"),
}
SWITCHYARD_FILES_MAX_BYTES = read("SWITCHYARD_FILES_MAX_BYTES")
SWITCHYARD_FILES_QUOTA_BYTES = read("SWITCHYARD_FILES_QUOTA_BYTES")
SWITCHYARD_FILES_UPLOAD_TIMEOUT_SECONDS = read("SWITCHYARD_FILES_UPLOAD_TIMEOUT_SECONDS")
# A request body not complete this long after its headers is answered 408.
SWITCHYARD_BODY_TIMEOUT_SECONDS = read("SWITCHYARD_BODY_TIMEOUT_SECONDS")
# A request's line and headers not complete this long: the connection is
# closed (config/patches.py, header_timeout).
SWITCHYARD_HEADER_TIMEOUT_SECONDS = read("SWITCHYARD_HEADER_TIMEOUT_SECONDS")
# A client that reads nothing while the write buffer is full: closed, a 499
# (config/patches.py, backpressure).
SWITCHYARD_CLIENT_STALL_SECONDS = read("SWITCHYARD_CLIENT_STALL_SECONDS")
# Sign-in throttle (console and admin): failures that lock an account or an
# address until the window opened by the first failure ends.
SWITCHYARD_LOGIN_ACCOUNT_LIMIT = read("SWITCHYARD_LOGIN_ACCOUNT_LIMIT")
SWITCHYARD_LOGIN_IP_LIMIT = read("SWITCHYARD_LOGIN_IP_LIMIT")
SWITCHYARD_LOGIN_WINDOW_SECONDS = read("SWITCHYARD_LOGIN_WINDOW_SECONDS")
# Interval of repeated response.in_progress events while a stream waits.
SWITCHYARD_KEEPALIVE_SECONDS = read("SWITCHYARD_KEEPALIVE_SECONDS")
SWITCHYARD_QUEUE_TIMEOUT = read("SWITCHYARD_QUEUE_TIMEOUT")
# How a backend is scored for a request (config/settings_routing.py).
SWITCHYARD_ROUTING = routing_settings(read)
# Background responses (README): "celery" or "local" (empty: celery with Redis).
SWITCHYARD_BACKGROUND_RUNNER = read("SWITCHYARD_BACKGROUND_RUNNER")
SWITCHYARD_BACKGROUND_TTL_SECONDS = read("SWITCHYARD_BACKGROUND_TTL_SECONDS")
SWITCHYARD_BACKGROUND_LEASE_SECONDS = read("SWITCHYARD_BACKGROUND_LEASE_SECONDS")
SWITCHYARD_BACKGROUND_FOLLOW_SECONDS = read("SWITCHYARD_BACKGROUND_FOLLOW_SECONDS")
SWITCHYARD_BACKGROUND_LOCAL_CONCURRENCY = read("SWITCHYARD_BACKGROUND_LOCAL_CONCURRENCY")
# The MCP tools the gateway runs for a request (docs/api/mcp-tools.md).
SWITCHYARD_MCP_LIST_TIMEOUT_SECONDS = read("SWITCHYARD_MCP_LIST_TIMEOUT_SECONDS")
SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS = read("SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS")
SWITCHYARD_MCP_DEADLINE_SECONDS = read("SWITCHYARD_MCP_DEADLINE_SECONDS")
SWITCHYARD_MCP_OUTPUT_BYTES = read("SWITCHYARD_MCP_OUTPUT_BYTES")
SWITCHYARD_WEB_SEARCH_TIMEOUT_SECONDS = read("SWITCHYARD_WEB_SEARCH_TIMEOUT_SECONDS")
SWITCHYARD_WEB_SEARCH_OUTPUT_BYTES = read("SWITCHYARD_WEB_SEARCH_OUTPUT_BYTES")
SWITCHYARD_WEB_PAGE_BYTES = read("SWITCHYARD_WEB_PAGE_BYTES")
SWITCHYARD_MCP_MAX_TURNS = read("SWITCHYARD_MCP_MAX_TURNS")
# What one POST /v1/embeddings may ask, and read of its backend (docs/api/embeddings.md).
SWITCHYARD_EMBEDDINGS_MAX_INPUTS = read("SWITCHYARD_EMBEDDINGS_MAX_INPUTS")
SWITCHYARD_EMBEDDINGS_MAX_CHARACTERS = read("SWITCHYARD_EMBEDDINGS_MAX_CHARACTERS")
SWITCHYARD_EMBEDDINGS_MAX_ANSWER_BYTES = read("SWITCHYARD_EMBEDDINGS_MAX_ANSWER_BYTES")
# Vector stores: parsing guards, vector indexes, ingestion threads (docs/reference/retrieval.md).
SWITCHYARD_RETRIEVAL_MAX_TEXT_CHARS = read("SWITCHYARD_RETRIEVAL_MAX_TEXT_CHARS")
SWITCHYARD_RETRIEVAL_MAX_PDF_PAGES = read("SWITCHYARD_RETRIEVAL_MAX_PDF_PAGES")
SWITCHYARD_RETRIEVAL_PARSE_SECONDS = read("SWITCHYARD_RETRIEVAL_PARSE_SECONDS")
SWITCHYARD_RETRIEVAL_INDEX_CACHE_VECTORS = read("SWITCHYARD_RETRIEVAL_INDEX_CACHE_VECTORS")
SWITCHYARD_RETRIEVAL_INGEST_THREADS = read("SWITCHYARD_RETRIEVAL_INGEST_THREADS")
SWITCHYARD_RETRIEVAL_VECTOR_BACKEND = read("SWITCHYARD_RETRIEVAL_VECTOR_BACKEND")
# After SIGTERM, in-flight exchanges finish for this long, then end (response.failed).
SWITCHYARD_SHUTDOWN_GRACE_SECONDS = read("SWITCHYARD_SHUTDOWN_GRACE_SECONDS")
# How long a WebSocket (WebSocket mode of /v1/responses) may stay open: then
# it gets the websocket_connection_limit_reached error and is closed.
SWITCHYARD_WEBSOCKET_MAX_SECONDS = read("SWITCHYARD_WEBSOCKET_MAX_SECONDS")
# Open WebSockets per API key and per organisation (0: no bound).
SWITCHYARD_WEBSOCKETS_PER_KEY = read("SWITCHYARD_WEBSOCKETS_PER_KEY")
SWITCHYARD_WEBSOCKETS_PER_ORGANISATION = read("SWITCHYARD_WEBSOCKETS_PER_ORGANISATION")
# /readyz stays 200 ("degraded") through a database or Redis blip this short.
SWITCHYARD_READY_GRACE_SECONDS = read("SWITCHYARD_READY_GRACE_SECONDS")
# With Redis, web processes also write the usage rows they queue; false
# leaves that to the Celery ``drain_usage`` task alone.
SWITCHYARD_USAGE_DRAIN_IN_WEB = read("SWITCHYARD_USAGE_DRAIN_IN_WEB")
SWITCHYARD_USAGE_STREAM = read("SWITCHYARD_USAGE_STREAM")
SWITCHYARD_USAGE_PENDING_MAX = read("SWITCHYARD_USAGE_PENDING_MAX")
# OpenTelemetry traces of API requests (responses_api/runtime/telemetry.py):
# on when an OTLP endpoint is given. The SDK reads its own OTEL_* variables.
SWITCHYARD_TRACES = bool(
    read("OTEL_EXPORTER_OTLP_ENDPOINT") or read("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
) and not read("OTEL_SDK_DISABLED")

# --- Management API (admin_api/, /api/v1/admin/) ----------------------------
# Requests per admin key, e.g. "600/min" (DRF's rate syntax: N/s, N/min,
# N/hour, N/day), counted in the cache (Redis in production).
SWITCHYARD_ADMIN_API_RATE = read("SWITCHYARD_ADMIN_API_RATE")
# A SCIM leaver's keys: "revoke" or "transfer" (accounts.services.deprovision).
SWITCHYARD_SCIM_DEPROVISION_KEYS = read("SWITCHYARD_SCIM_DEPROVISION_KEYS")
REST_FRAMEWORK = {
    # Admin keys only: no session, hence no CSRF, on this API.
    "DEFAULT_AUTHENTICATION_CLASSES": ["admin_api.auth.AdminKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["admin_api.auth.AdminKeyRole"],
    "DEFAULT_THROTTLE_CLASSES": ["admin_api.auth.AdminKeyThrottle"],
    "DEFAULT_PAGINATION_CLASS": "admin_api.pagination.CursorList",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["admin_api.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "admin_api.errors.exception_handler",
    # ``format`` is the usage export's own parameter (csv, jsonl).
    "URL_FORMAT_OVERRIDE": None,
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Switchyard management API",
    "DESCRIPTION": (
        "Organisation settings, API keys, backends, models, members, usage and audit, "
        "for automation. Authenticate with an admin API key: `Authorization: Bearer sy_admin_…`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SCHEMA_PATH_PREFIX": "/api/v1/admin",
    "SCHEMA_PATH_PREFIX_TRIM": True,
    "SERVERS": [{"url": "/api/v1/admin"}],
    "COMPONENT_SPLIT_REQUEST": True,
    # Enums stay inline: every resource has its own constant ``object``.
    "POSTPROCESSING_HOOKS": ["admin_api.schema.add_errors"],
}
