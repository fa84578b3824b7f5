"""Production refuses settings that are given but unsafe, and says how to fix each."""

from __future__ import annotations

import pytest

from tests.ops.test_settings import production_env, run, show

START = ["-c", "import django; django.setup()"]


@pytest.mark.parametrize(
    ("overrides", "named", "fix"),
    [
        ({"SECRET_KEY": "short-but-not-empty-9f2a"}, "SECRET_KEY", "secrets.token_urlsafe(50)"),
        ({"ALLOWED_HOSTS": "*"}, "ALLOWED_HOSTS", "list the names"),
        ({"ALLOWED_HOSTS": "switchyard.example.com,*"}, "ALLOWED_HOSTS", "list the names"),
        ({"DATABASE_URL": "sqlite:////tmp/switchyard.db"}, "SQLite", "SWITCHYARD_ALLOW_SQLITE"),
    ],
    ids=["short-secret-key", "any-host", "any-host-among-others", "sqlite"],
)
def test_production_refuses_to_start_with_an_unsafe_setting(overrides, named, fix):
    result = run(START, production_env(**overrides))
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "settings are unsafe" in result.stderr
    assert named in result.stderr and fix in result.stderr


def test_a_short_secret_key_in_a_mounted_file_is_refused_too(tmp_path):
    (tmp_path / "SECRET_KEY").write_text("tiny\n")
    env = production_env(SECRET_KEY_FILE=str(tmp_path / "SECRET_KEY"))
    del env["SECRET_KEY"]
    result = run(START, env)
    assert result.returncode != 0 and "SECRET_KEY is shorter than 50" in result.stderr


def test_every_unsafe_setting_is_named_at_once():
    env = production_env(SECRET_KEY="x" * 49, ALLOWED_HOSTS="*")
    result = run(START, env)
    assert "SECRET_KEY" in result.stderr and "ALLOWED_HOSTS" in result.stderr


def test_sqlite_in_production_when_explicitly_allowed(tmp_path):
    env = production_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", SWITCHYARD_ALLOW_SQLITE="true"
    )
    values = show(env, "DATABASES")
    assert values["DATABASES"]["default"]["ENGINE"].endswith("sqlite3")


def test_a_fifty_character_secret_key_and_named_hosts_start():
    env = production_env(SECRET_KEY="k" * 50, ALLOWED_HOSTS="switchyard.example.com")
    assert show(env, "ALLOWED_HOSTS")["ALLOWED_HOSTS"] == ["switchyard.example.com"]
