"""PostgreSQL behind PgBouncer in transaction pooling (``SWITCHYARD_PGBOUNCER``).

The settings are read in a subprocess, as a process would read them. With
``pgbouncer`` installed and PostgreSQL under test, a real PgBouncer in
transaction mode sits between a Django process and the test database: two
threads of that process share two server connections, so consecutive
statements of one thread land on either. With the flag on, repeated
queries (which psycopg would prepare) and ``.iterator()`` (a server-side
cursor) work; without it they fail, which the last test shows too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, _log_path, free_port, wait_for
from tests.ops.test_settings import SHOW

BASE_ENV = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings"}


def _settings(**env: str) -> dict:
    import json

    result = subprocess.run(
        [sys.executable, "-c", SHOW % (("DATABASES",),)],
        cwd=ROOT,
        env={**BASE_ENV, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["DATABASES"]["default"]


def test_the_flag_turns_off_what_cannot_cross_transactions():
    url = "postgres://switchyard:CHANGE-ME@pgbouncer.internal:6432/switchyard"
    plain = _settings(DATABASE_URL=url)
    assert not plain.get("DISABLE_SERVER_SIDE_CURSORS")
    assert "prepare_threshold" not in plain.get("OPTIONS", {})
    pooled = _settings(DATABASE_URL=url, SWITCHYARD_PGBOUNCER="true")
    assert pooled["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert pooled["OPTIONS"]["prepare_threshold"] is None
    assert pooled["CONN_MAX_AGE"] == plain["CONN_MAX_AGE"] == 60  # connections to PgBouncer


def test_the_flag_refuses_a_database_that_is_not_postgresql():
    result = subprocess.run(
        [sys.executable, "-c", SHOW % (("DATABASES",),)],
        cwd=ROOT,
        env={**BASE_ENV, "SWITCHYARD_PGBOUNCER": "true"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "SWITCHYARD_PGBOUNCER=true needs a postgres:// DATABASE_URL" in result.stderr


# --------------------------------------------------------------------------- a real PgBouncer

# Two threads, each with its own connection to PgBouncer, run the same
# query many times and read a table through .iterator(chunk_size=1).
WORKLOAD = textwrap.dedent(
    """
    import threading, django
    django.setup()
    from django.db import connection
    from django.contrib.contenttypes.models import ContentType

    errors = []

    def work():
        try:
            for i in range(40):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT %s::int + 1", [i])
                    assert cursor.fetchone()[0] == i + 1
                assert len(list(ContentType.objects.order_by("id").iterator(chunk_size=1))) > 2
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads: t.start()
    for t in threads: t.join()
    print("ERRORS", errors)
    raise SystemExit(1 if errors else 0)
    """
)


@pytest.fixture(scope="module")
def pgbouncer(django_db_setup) -> Iterator[str]:
    from django.db import connection

    db = connection.settings_dict  # the test database's, once it is set up
    if not db["ENGINE"].endswith("postgresql"):
        pytest.skip("needs PostgreSQL under test (DATABASE_URL=postgres://...)")
    binary = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if binary is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    # PgBouncer refuses to run as root; as root it is started as nobody,
    # in a directory outside pytest's private one.
    as_root = os.geteuid() == 0
    directory = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    directory.chmod(0o777)
    user = db.get("USER") or "postgres"
    (directory / "users.txt").write_text(f'"{user}" "{db.get("PASSWORD") or ""}"\n')
    port = free_port()
    ini = directory / "pgbouncer.ini"
    target = f"host={db.get('HOST') or '127.0.0.1'} port={db.get('PORT') or 5432}"
    ini.write_text(
        textwrap.dedent(
            f"""
            [databases]
            {db["NAME"]} = {target} dbname={db["NAME"]}
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = {port}
            unix_socket_dir =
            auth_type = trust
            auth_file = {directory / "users.txt"}
            pool_mode = transaction
            default_pool_size = 2
            max_client_conn = 20
            logfile = {directory / "pgbouncer.log"}
            pidfile = {directory / "pgbouncer.pid"}
            """
        )
    )
    log = _log_path("pgbouncer")
    command = [binary, *(["-u", "nobody"] if as_root else []), str(ini)]
    for path in (ini, directory / "users.txt"):
        path.chmod(0o644)
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)

    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited: {log.read_text()}")
        import socket

        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, timeout=20)
        password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
        yield f"postgres://{user}{password}@127.0.0.1:{port}/{db['NAME']}"
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


def _workload(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WORKLOAD],
        cwd=ROOT,
        env={**BASE_ENV, "DATABASE_URL": url, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db
def test_through_pgbouncer_in_transaction_mode_with_the_flag(pgbouncer):
    result = _workload(pgbouncer, SWITCHYARD_PGBOUNCER="true")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ERRORS []" in result.stdout


@pytest.mark.django_db
def test_without_the_flag_the_same_work_fails(pgbouncer):
    result = _workload(pgbouncer)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "does not exist" in result.stdout, result.stdout
