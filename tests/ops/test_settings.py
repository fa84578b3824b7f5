"""Production settings: from the environment or mounted files, hardened, loud when incomplete.

Settings are read once at import, so each case runs Django in a subprocess
with exactly the environment a production process would have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet

from tests.conftest import ROOT

SHOW = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({n: getattr(s, n, None) for n in %r}, default=str))"
)


def production_env(**overrides: str) -> dict[str, str]:
    """What the Kubernetes ConfigMap and Secret give a web pod."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")
    }
    env.update(
        SWITCHYARD_PRODUCTION="true",
        DEBUG="false",
        SECRET_KEY="k3y-" + "x7Qm2vLr9ZpTe4Wb" * 4,
        DATABASE_URL="postgres://switchyard:pw@db.internal:5432/switchyard",
        REDIS_URL="redis://redis.internal:6379/0",
        SWITCHYARD_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        METRICS_TOKEN="metrics-token-for-tests",
        ALLOWED_HOSTS="switchyard.example.com,localhost",
        CSRF_TRUSTED_ORIGINS="https://switchyard.example.com",
        SWITCHYARD_BEHIND_TLS="true",
        SECURE_SSL_REDIRECT="true",
        LOG_FORMAT="json",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def show(env: dict[str, str], *names: str) -> dict:
    result = run(["-c", SHOW % (names,)], env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_check_deploy_is_clean_with_a_production_environment():
    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_flags_a_process_that_is_not_behind_tls():
    env = production_env(SWITCHYARD_BEHIND_TLS="false", SECURE_SSL_REDIRECT="false")
    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode != 0
    assert "SECURE_SSL_REDIRECT" in result.stderr + result.stdout


@pytest.mark.parametrize(
    "missing",
    ["SECRET_KEY", "DATABASE_URL", "REDIS_URL", "SWITCHYARD_ENCRYPTION_KEY", "ALLOWED_HOSTS"],
)
def test_production_refuses_to_start_without_a_required_setting(missing):
    env = production_env()
    del env[missing]
    result = run(["manage.py", "check"], env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"settings are missing: {missing}." in result.stderr


def test_the_message_names_every_missing_setting_at_once():
    env = production_env()
    for name in ("SECRET_KEY", "REDIS_URL"):
        del env[name]
    result = run(["manage.py", "check"], env)
    assert "settings are missing: SECRET_KEY, REDIS_URL." in result.stderr


def test_debug_is_refused_in_production():
    result = run(["manage.py", "check"], production_env(DEBUG="true"))
    assert result.returncode != 0
    assert "DEBUG must not be true" in result.stderr


def test_a_malformed_encryption_key_is_refused():
    result = run(["manage.py", "check"], production_env(SWITCHYARD_ENCRYPTION_KEY="too-short"))
    assert result.returncode != 0
    assert "SWITCHYARD_ENCRYPTION_KEY is not a Fernet key" in result.stderr


def test_secrets_are_read_from_mounted_files(tmp_path):
    env = production_env()
    for name in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "METRICS_TOKEN"):
        (tmp_path / name).write_text(env.pop(name) + "\n")  # trailing newline, as from `echo`
        env[f"{name}_FILE"] = str(tmp_path / name)
    values = show(env, "SECRET_KEY", "REDIS_URL", "METRICS_TOKEN", "DATABASES")
    assert values["SECRET_KEY"] == (tmp_path / "SECRET_KEY").read_text().strip()
    assert values["REDIS_URL"] == "redis://redis.internal:6379/0"
    assert values["METRICS_TOKEN"] == "metrics-token-for-tests"
    assert values["DATABASES"]["default"]["HOST"] == "db.internal"


def test_an_unreadable_secret_file_is_named_in_the_error(tmp_path):
    env = production_env(SECRET_KEY_FILE=str(tmp_path / "absent"))
    result = run(["manage.py", "check"], env)
    assert result.returncode != 0
    assert "SECRET_KEY_FILE=" in result.stderr and "cannot be read" in result.stderr


def test_behind_tls_cookies_are_secure_and_hsts_is_on():
    values = show(
        production_env(),
        "DEBUG",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
        "SECURE_SSL_REDIRECT",
        "SECURE_REDIRECT_EXEMPT",
        "ALLOWED_HOSTS",
        "CSRF_TRUSTED_ORIGINS",
    )
    assert values["DEBUG"] is False
    assert values["SESSION_COOKIE_SECURE"] and values["CSRF_COOKIE_SECURE"]
    assert values["SECURE_HSTS_SECONDS"] >= 31_536_000
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["SECURE_SSL_REDIRECT"] is True
    assert {"^healthz$", "^readyz$", "^metrics$"} <= set(values["SECURE_REDIRECT_EXEMPT"])
    assert values["ALLOWED_HOSTS"] == ["switchyard.example.com", "localhost"]
    assert values["CSRF_TRUSTED_ORIGINS"] == ["https://switchyard.example.com"]


def test_forwarded_proto_is_not_trusted_unless_behind_tls():
    env = production_env(SWITCHYARD_BEHIND_TLS="false")
    assert show(env, "SECURE_PROXY_SSL_HEADER")["SECURE_PROXY_SSL_HEADER"] is None


def test_the_embedded_default_needs_no_environment():
    keep = ("PATH", "HOME", "LANG", "DJANGO_SETTINGS_MODULE")
    env = {k: v for k, v in production_env().items() if k in keep}
    values = show(env, "DEBUG", "SECRET_KEY", "LOG_FORMAT", "SECURE_SSL_REDIRECT")
    assert values["DEBUG"] is False
    assert values["SECRET_KEY"]
    assert values["LOG_FORMAT"] == "text"
    assert values["SECURE_SSL_REDIRECT"] is False


def test_production_refuses_the_fast_password_hasher():
    result = run(["manage.py", "check"], production_env(SWITCHYARD_PASSWORD_HASHERS="fast"))
    assert result.returncode != 0
    assert "SWITCHYARD_PASSWORD_HASHERS=fast is for tests" in result.stderr


def test_passwords_get_the_slow_default_hash_unless_a_test_asks_for_the_fast_one():
    env = production_env(SWITCHYARD_PRODUCTION=None, SWITCHYARD_PASSWORD_HASHERS=None)
    assert show(env, "PASSWORD_HASHERS")["PASSWORD_HASHERS"][0].endswith("PBKDF2PasswordHasher")
    fast = show({**env, "SWITCHYARD_PASSWORD_HASHERS": "fast"}, "PASSWORD_HASHERS")
    assert fast["PASSWORD_HASHERS"] == ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_the_test_processes_hash_passwords_fast():
    from django.conf import settings

    assert os.environ["SWITCHYARD_PASSWORD_HASHERS"] == "fast"
    assert settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]
