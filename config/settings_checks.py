"""Settings that stop the process at start-up, each with how to fix it.

``config/settings.py`` reads every setting; what it must refuse is kept here
so that the list of refusals reads in one place, and each message names the
environment variable to change. A refusal raises ``ImproperlyConfigured``
before Django starts: a process never runs half-configured.
"""

from __future__ import annotations

import environ
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from config.declared.environment import given, read

# In production (SWITCHYARD_PRODUCTION=true) the embedded defaults are refused:
# every one of these must be given, or the process stops at startup with one
# message naming all that is missing.
PRODUCTION_REQUIRED = (
    "SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "SWITCHYARD_ENCRYPTION_KEY",
    "ALLOWED_HOSTS",
)


def production_refusals(*, debug: bool) -> None:
    """Refuse production without its settings, with DEBUG, or with settings
    given but unsafe (all of those named in one message)."""
    missing = [name for name in PRODUCTION_REQUIRED if not given(name)]
    if missing:
        raise ImproperlyConfigured(
            "SWITCHYARD_PRODUCTION is set but these settings are missing: "
            + ", ".join(missing)
            + ". Set each in the environment (secrets also as NAME_FILE, a path to a file "
            "holding the value); see platform/README.md."
        )
    if debug:
        raise ImproperlyConfigured("DEBUG must not be true when SWITCHYARD_PRODUCTION is set.")
    # Given, but unsafe: each problem says how to fix it, all in one message.
    unsafe = []
    if len(given("SECRET_KEY")) < 50:
        unsafe.append(
            "SECRET_KEY is shorter than 50 characters; generate one with: "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    if any("*" in host for host in read("ALLOWED_HOSTS")):
        unsafe.append(
            "ALLOWED_HOSTS contains '*', which accepts any Host header; list the names "
            "clients and probes use (e.g. switchyard.example.com,localhost)"
        )
    database = environ.Env.db_url_config(given("DATABASE_URL"))
    if database["ENGINE"].endswith("sqlite3") and not read("SWITCHYARD_ALLOW_SQLITE"):
        unsafe.append(
            "DATABASE_URL is a SQLite database, which serialises writers and cannot be shared "
            "by several processes; use postgres://USER:PASSWORD@HOST:5432/NAME, or set "
            "SWITCHYARD_ALLOW_SQLITE=true for a single-process installation"
        )
    if unsafe:
        raise ImproperlyConfigured(
            "SWITCHYARD_PRODUCTION is set but these settings are unsafe: " + "; ".join(unsafe) + "."
        )


def fernet_refusals(**keys: str) -> None:
    """Refuse a setting (named by its keyword) whose comma-separated entries
    are not all Fernet keys: found now, not at the first decryption."""
    for name, value in keys.items():
        for key in filter(None, (k.strip() for k in value.split(","))):
            try:
                Fernet(key)
            except ValueError:
                raise ImproperlyConfigured(
                    f"{name} is not a Fernet key (each comma-separated entry is 32 url-safe "
                    "base64-encoded bytes); generate one with: python -c "
                    "'from cryptography.fernet import Fernet; "
                    "print(Fernet.generate_key().decode())'"
                ) from None
