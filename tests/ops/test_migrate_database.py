"""``SWITCHYARD_MIGRATE_DATABASE_URL``: the address ``manage.py migrate`` uses
instead of ``DATABASE_URL``, so that migrations reach PostgreSQL directly
while everything else goes through PgBouncer (docs/operations/postgresql.md).
Run as the systemd unit and the Kubernetes Job run it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

from tests.conftest import ROOT

# Nothing listens there: a command that connects to it fails.
UNREACHABLE = "postgres://switchyard@127.0.0.1:9/unreachable"


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "SWITCHYARD_MIGRATE_DATABASE_URL", "DJANGO_"))
    }
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_migrate_uses_its_own_address_and_nothing_else_does(tmp_path):
    direct = tmp_path / "direct.sqlite3"
    env = {"DATABASE_URL": UNREACHABLE, "SWITCHYARD_MIGRATE_DATABASE_URL": f"sqlite:///{direct}"}

    migrated = _manage("migrate", "--noinput", **env)
    assert migrated.returncode == 0, migrated.stderr
    with sqlite3.connect(direct) as db:
        applied = db.execute("SELECT count(*) FROM django_migrations").fetchone()[0]
    assert applied > 10

    # The wait before new code starts (`migrate --check`) asks the same database.
    checked = _manage("migrate", "--check", **env)
    assert checked.returncode == 0, checked.stderr

    # Any other command keeps DATABASE_URL, and fails to reach it.
    other = _manage("showmigrations", "responses_api", **env)
    assert other.returncode != 0
    assert "unreachable" in other.stderr or "127.0.0.1" in other.stderr, other.stderr
