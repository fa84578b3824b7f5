"""Switchyard settings, read from the environment.

With no environment at all this is the embedded default (SQLite, in-memory
channel layer and cache, eager Celery), meant for a first run. Production
differs only by environment variables: ``DATABASE_URL``, ``REDIS_URL``,
``SECRET_KEY`` and friends; each secret may also be given as ``NAME_FILE``
pointing at a mounted file.
"""

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()


def secret(name: str, default: str | None = None) -> str | None:
    """Read NAME, or the contents of the file named by NAME_FILE."""
    path = env.str(f"{name}_FILE", default="")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path} cannot be read: {exc}") from exc
    return env.str(name, default=default)


DEBUG = env.bool("DEBUG", default=False)
PRODUCTION = env.bool("SWITCHYARD_PRODUCTION", default=False)

SECRET_KEY = secret("SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set in production.")
    SECRET_KEY = "switchyard-embedded-default-not-for-production"

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "channels",
    "accounts",
    "responses_api",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
    "default": env.db_url_config(secret("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60))
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # SQLite serialises writers; a generous timeout keeps concurrent usage
    # writes from failing with "database is locked" in the embedded default.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # Transactions take the write lock when they begin: a deferred one that
    # reads, then writes while another process writes, fails at once with
    # "database is locked" instead of waiting for the timeout.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / ".test-db.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = secret("REDIS_URL") or ""

if REDIS_URL:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BEAT_SCHEDULE = {
    "backend-health": {"task": "responses_api.tasks.check_backends", "schedule": 15.0},
    "usage-drain": {"task": "responses_api.tasks.drain_usage", "schedule": 5.0},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
LOGOUT_REDIRECT_URL = "/console/login/"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.channels.server": {"level": "WARNING"}, "daphne": {"level": "WARNING"}},
}

# --- Switchyard -------------------------------------------------------------
# Fernet key that encrypts upstream backend API keys at rest. Derived from
# SECRET_KEY when unset, so the embedded default needs no configuration.
SWITCHYARD_ENCRYPTION_KEY = secret("SWITCHYARD_ENCRYPTION_KEY") or ""
# Seconds an API key or a model catalogue stays in a process's cache. Bounds
# how long a revocation takes to reach every web process.
SWITCHYARD_AUTH_CACHE_SECONDS = env.float("SWITCHYARD_AUTH_CACHE_SECONDS", default=5.0)
SWITCHYARD_CATALOG_CACHE_SECONDS = env.float("SWITCHYARD_CATALOG_CACHE_SECONDS", default=5.0)
# Upstream timeouts (seconds).
SWITCHYARD_CONNECT_TIMEOUT = env.float("SWITCHYARD_CONNECT_TIMEOUT", default=5.0)
SWITCHYARD_READ_TIMEOUT = env.float("SWITCHYARD_READ_TIMEOUT", default=600.0)
# Largest request body accepted, in bytes.
SWITCHYARD_MAX_BODY_BYTES = env.int("SWITCHYARD_MAX_BODY_BYTES", default=16 * 1024 * 1024)
# Interval of repeated response.in_progress events while a stream waits.
SWITCHYARD_KEEPALIVE_SECONDS = env.float("SWITCHYARD_KEEPALIVE_SECONDS", default=10.0)
SWITCHYARD_QUEUE_TIMEOUT = env.float("SWITCHYARD_QUEUE_TIMEOUT", default=30.0)
# With Redis, web processes also write the usage rows they queue; false
# leaves that to the Celery ``drain_usage`` task alone.
SWITCHYARD_USAGE_DRAIN_IN_WEB = env.bool("SWITCHYARD_USAGE_DRAIN_IN_WEB", default=True)
