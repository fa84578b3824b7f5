"""The vector store tests again, on a PostgreSQL that has pgvector.

The machine's PostgreSQL may lack pgvector; the ``pgserver`` wheel (a dev
dependency) bundles PostgreSQL 16 binaries built with it. This starts one
(``initdb`` into a temporary folder, on a free port, trust authentication;
as the ``postgres`` system user when the tests run as root, which
PostgreSQL refuses), then runs the modules below in a pytest process of
their own whose ``DATABASE_URL`` is that server: Django's test database is
created there, migration 0022 installs the extension and its tables, and
``SWITCHYARD_RETRIEVAL_VECTOR_BACKEND=pgvector``. ``SWITCHYARD_TEST_PGVECTOR
=required`` makes the pgvector modules fail, not skip, should the database
lack it; and every test of theirs must have passed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port

MODULES = (
    "tests/retrieval/test_pgvector.py",
    "tests/tools/test_file_search_pgvector.py",
    "tests/retrieval/test_search.py",
    "tests/retrieval/test_ingest.py",
    "tests/vector_stores/test_search_stores.py",
    "tests/vector_stores/test_tenancy_and_hostile.py",
    "tests/tools/test_file_search.py",
)
REQUIRED = ("test_pgvector.py", "test_file_search_pgvector.py")
# What a failure report shows of each failing test, and of the server's log.
TRACEBACK_CHARS = 4000
LOG_ENTRIES = 20
DETAILS = ("DETAIL", "HINT", "STATEMENT", "CONTEXT")


@dataclass(frozen=True)
class Server:
    url: str
    log: Path

    def log_errors(self) -> str:
        """The server log's deadlocks, lock waits and fatal errors, then its
        other errors (a writer's refused row, say), the last of each with
        their details: what a failed flush or query met."""
        if not self.log.exists():
            return ""
        entries: list[str] = []
        for line in self.log.read_text(errors="replace").splitlines():
            # A deadlock's wait graph goes on over indented lines; DETAIL,
            # HINT and STATEMENT lines belong to the message before them.
            joins = line.startswith(("\t", " ")) or any(f" {d}:  " in line for d in DETAILS)
            if joins and entries:
                entries[-1] += "\n" + line
            else:
                entries.append(line)
        locks = ("deadlock", "waiting for", "FATAL:", "PANIC:")
        first = [e for e in entries if any(mark in e for mark in locks)]
        errors = [e for e in entries if "ERROR:" in e and e not in first]
        return "\n".join(first[-LOG_ENTRIES:] + errors[-LOG_ENTRIES // 2 :])


def bundled_postgresql() -> Path | None:
    """pgserver's ``pginstall`` folder when it holds the server and pgvector.
    Found without importing the package (its import writes a runtime folder)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    needed = [root / "bin" / name for name in ("initdb", "pg_ctl", "postgres")]
    needed.append(root / "lib" / "postgresql" / "vector.so")
    needed.append(root / "share" / "postgresql" / "extension" / "vector.control")
    return root if all(path.exists() for path in needed) else None


@contextlib.contextmanager
def pgvector_server() -> Iterator[Server]:
    """A PostgreSQL with pgvector (its URL and log); stopped and removed
    after. Lock waits are logged, so that a failure's log says what waited
    on what."""
    root = bundled_postgresql()
    if root is None:
        pytest.skip("pgserver's bundled PostgreSQL with pgvector is not installed (pip: pgserver)")
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("Running as root, and there is no postgres user to run PostgreSQL as")
        as_user = ["runuser", "-u", "postgres", "--"]
    folder = Path(tempfile.mkdtemp(prefix="switchyard-pgvector-"))
    if owner is not None:
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    data, log = folder / "data", folder / "postgresql.log"
    port = free_port()

    def run(*command: str) -> None:
        done = subprocess.run(
            [*as_user, *command], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout}\n{done.stderr}"

    bin_dir = root / "bin"
    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
            "-E", "UTF8", "--no-sync")  # fmt: skip
        options = (
            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c log_lock_waits=on"
        )
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w",
            "-t", "60", "start")  # fmt: skip
        try:
            yield Server(f"postgres://postgres@127.0.0.1:{port}/switchyard", log)
        finally:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def failures(report: Path) -> list[str]:
    """Each failed or erred test of a junitxml report: its id, message and
    traceback (a teardown's error too: a flush that failed names its cause
    there, which the end of the output may have lost)."""
    found = []
    for case in ET.parse(report).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                name = f"{case.get('classname')}::{case.get('name')}"
                text = (child.text or "")[-TRACEBACK_CHARS:]
                found.append(f"{child.tag.upper()} {name}: {child.get('message', '')}\n{text}")
    return found


@pytest.mark.first
@pytest.mark.timeout(900)  # a PostgreSQL started, migrated, and seven modules run against it
def test_the_vector_store_tests_pass_on_postgresql_with_pgvector(tmp_path):
    report = tmp_path / "report.xml"
    with pgvector_server() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env.update(
            DATABASE_URL=server.url,
            SWITCHYARD_RETRIEVAL_VECTOR_BACKEND="pgvector",
            SWITCHYARD_TEST_PGVECTOR="required",
        )
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider",
             f"--junitxml={report}", *MODULES],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=840, check=False,
        )  # fmt: skip
        log_errors = server.log_errors()
    if done.returncode != 0:
        failed = failures(report) if report.exists() else []
        pytest.fail(
            "\n\n".join(
                [
                    *failed,
                    "--- end of the output ---\n" + done.stdout[-3000:] + done.stderr[-2000:],
                    "--- PostgreSQL's errors ---\n" + log_errors,
                ]
            ),
            pytrace=False,
        )
    cases = ET.parse(report).getroot().iter("testcase")
    outcomes: dict[str, list[str]] = {}
    for case in cases:
        module = case.get("classname", "").rsplit(".", 1)[-1] + ".py"
        ends = [child.tag for child in case if child.tag in ("skipped", "failure", "error")]
        outcome = ends[0] if ends else "passed"
        outcomes.setdefault(module, []).append(outcome)
    for module in REQUIRED:
        assert outcomes.get(module) and set(outcomes[module]) == {"passed"}, outcomes


def test_a_failure_report_names_each_failing_test_and_the_server_s_deadlocks(tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.a.test_b" name="test_ok"/>'
        '<testcase classname="tests.a.test_b" name="test_flushed">'
        '<error message="failed on teardown with CommandError">Traceback ...\n'
        "psycopg.errors.DeadlockDetected: deadlock detected</error></testcase>"
        "</testsuite></testsuites>"
    )
    found = failures(report)
    assert len(found) == 1
    assert found[0].startswith("ERROR tests.a.test_b::test_flushed: failed on teardown")
    assert found[0].endswith("DeadlockDetected: deadlock detected")
    log = tmp_path / "postgresql.log"
    log.write_text(
        "2026-01-01 00:00:00.000 UTC [7] ERROR:  insert or update violates foreign key\n"
        "2026-01-01 00:00:00.000 UTC [7] STATEMENT:  COMMIT\n"
        "2026-01-01 00:00:01.000 UTC [8] ERROR:  deadlock detected\n"
        "2026-01-01 00:00:01.000 UTC [8] DETAIL:  Process 8 waits for AccessExclusiveLock\n"
        "\tProcess 9 waits for RowShareLock\n"
        "2026-01-01 00:00:01.000 UTC [8] STATEMENT:  TRUNCATE t\n"
        "2026-01-01 00:00:02.000 UTC [1] LOG:  checkpoint complete\n"
    )
    shown = Server("postgres://x", log).log_errors().splitlines()
    assert shown[:4] == [
        "2026-01-01 00:00:01.000 UTC [8] ERROR:  deadlock detected",
        "2026-01-01 00:00:01.000 UTC [8] DETAIL:  Process 8 waits for AccessExclusiveLock",
        "\tProcess 9 waits for RowShareLock",
        "2026-01-01 00:00:01.000 UTC [8] STATEMENT:  TRUNCATE t",
    ]
    assert shown[4:] == [
        "2026-01-01 00:00:00.000 UTC [7] ERROR:  insert or update violates foreign key",
        "2026-01-01 00:00:00.000 UTC [7] STATEMENT:  COMMIT",
    ]
