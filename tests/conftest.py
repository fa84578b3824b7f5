"""Shared fixtures: three people in two organisations, and live processes.

Alice is the owner of Acme, Bob a developer in Acme, Charlie the owner of
Globex. Live tests run a real simulator backend and a real daphne process
against the test database (so they need ``transaction=True``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from django.conf import settings

from tests.support import WaitTimeout, wait_until

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

# Password hashing is slow on purpose; tests need none of that. The server
# processes started below inherit the environment (config/settings.py reads
# it), and must read the hashes this process writes; this process loaded its
# settings before this module, so it is told directly.
os.environ["SWITCHYARD_PASSWORD_HASHERS"] = "fast"
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Every HTTP client the tests make (httpx's functions, the SDKs) builds an
# SSL context. Given a bundle file (certifi's, or SSL_CERT_FILE), OpenSSL
# parses every certificate in it each time; given the system's hashed
# directory, it reads one only when a peer's chain needs it. The same
# authorities are trusted either way, and the processes started below
# inherit the choice.
_CERTS = Path("/etc/ssl/certs")
if (_CERTS / "ca-certificates.crt").is_file():
    os.environ.pop("SSL_CERT_FILE", None)
    os.environ["SSL_CERT_DIR"] = str(_CERTS)


def worker_redis_url(url: str, worker: str) -> str:
    """The Redis database of one pytest-xdist worker (``gw0``, ``gw1``...):
    the base URL's database number plus the worker's index. Rate-limit,
    spend, routing and usage-stream keys name no test run, so two workers
    sharing a database would count each other's requests."""
    index = int(worker.removeprefix("gw"))
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{base + index}"))


# Settings were loaded before this module (pytest-django sets Django up
# first), so the worker's database is given to them as well as to the
# environment the server processes and the tests' own Redis clients read.
if os.environ.get("REDIS_URL") and os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["REDIS_URL"] = worker_redis_url(
        os.environ["REDIS_URL"], os.environ["PYTEST_XDIST_WORKER"]
    )
    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.CACHES["default"]["LOCATION"] = settings.REDIS_URL
    settings.CELERY_BROKER_URL = settings.REDIS_URL


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    def answers() -> bool:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1.0)
        except httpx.HTTPError:
            return False
        return True

    wait_until(answers, timeout=timeout, message=f"{url} did not come up")


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.05) -> T:
    """``tests.support.wait_until`` with positional arguments."""
    return wait_until(predicate, timeout=timeout, interval=interval)


@dataclass
class Proc:
    process: subprocess.Popen
    url: str
    port: int
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                # Gone before the test database is dropped: PostgreSQL
                # refuses to drop one that a live process is connected to.
                self.process.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _log_path(name: str) -> Path:
    directory = ROOT / "tests" / "artifacts" / "logs"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{name}-{uuid.uuid4().hex[:8]}.log"


def start_simulator(*args: str, env: dict[str, str] | None = None) -> Proc:
    port = free_port()
    log = _log_path("simulator")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "simulator", "--port", str(port), *args],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env or os.environ.copy(),
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/v1/models", proc=process)
    return Proc(process, url + "/v1", port, log)


def test_database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{db['NAME']}"


def server_env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env["DATABASE_URL"] = test_database_url()
    env.setdefault("SWITCHYARD_AUTH_CACHE_SECONDS", "0.3")
    env.setdefault("SWITCHYARD_CATALOG_CACHE_SECONDS", "0.3")
    env["SWITCHYARD_USAGE_STREAM"] = USAGE_STREAM
    env.update(extra)
    return env


USAGE_STREAM = f"switchyard:usage:test:{uuid.uuid4().hex[:8]}"
# This process's settings were loaded already: they are told too, so that
# rows it hands over go where the server processes drain.
os.environ["SWITCHYARD_USAGE_STREAM"] = settings.SWITCHYARD_USAGE_STREAM = USAGE_STREAM


def start_daphne(
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    app: str = "config.asgi:application",
) -> Proc:
    """A web process as deployed: daphne through ``python -m config.serve``."""
    port = free_port()
    log = _log_path("daphne")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "config.serve",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            *args,
            app,
        ],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env or server_env(),
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/healthz", proc=process)
    return Proc(process, url, port, log)


@pytest.fixture(scope="session")
def simulator() -> Iterator[Proc]:
    proc = start_simulator()
    yield proc
    proc.stop()


@pytest.fixture
def local_simulator():
    """The simulator on a thread of this process (``tests.inprocess``), for
    tests that call the API in-process; ``simulator`` is its own process."""
    from tests import inprocess

    return inprocess.simulator()


@pytest.fixture
def gateway():
    """The API answering in this process (``tests.inprocess``)."""
    from tests import inprocess

    with inprocess.serving() as gateway:
        yield gateway


@pytest.fixture(scope="session")
def api_server(django_db_setup, django_db_blocker) -> Iterator[Proc]:
    """A daphne process serving the project against the test database."""
    proc = start_daphne()
    yield proc
    proc.stop()


@pytest.fixture
def people(db):
    from accounts.services.members import member_ensure
    from accounts.services.organisations import organisation_ensure

    acme, _ = organisation_ensure(slug="acme", name="Acme")
    globex, _ = organisation_ensure(slug="globex", name="Globex")
    alice, _ = member_ensure(
        organisation=acme, email="alice@example.com", role="owner", password="alice-password-1"
    )
    bob, _ = member_ensure(
        organisation=acme, email="bob@example.com", role="developer", password="bob-password-1"
    )
    charlie, _ = member_ensure(
        organisation=globex,
        email="charlie@example.com",
        role="owner",
        password="charlie-password-1",
    )
    return {
        "acme": acme,
        "globex": globex,
        "alice": alice.user,
        "bob": bob.user,
        "charlie": charlie.user,
    }


@dataclass
class Tenant:
    organisation: object
    backend: object
    model: object
    key: str


@pytest.fixture
def provision(people):
    """Give an organisation a backend, a model and an API key."""
    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    def make(
        org_slug: str,
        backend_url: str,
        *,
        model: str = "sim-model",
        backend_name: str = "sim",
        dialect: str = "openai",
        **key_options,
    ) -> Tenant:
        org = people[org_slug]
        backend, _ = backend_ensure(
            organisation=org, name=backend_name, base_url=backend_url, dialect=dialect
        )
        served, _ = model_ensure(
            organisation=org, public_id=model, backend=backend, upstream_name="sim-model"
        )
        _, raw = api_key_create(organisation=org, name=f"{org_slug} key", **key_options)
        return Tenant(org, backend, served, raw)

    return make


def usage_rows(**filters):
    from responses_api.models import UsageLog

    return list(UsageLog.objects.filter(**filters).order_by("created_at"))


def wait_rows(count: int = 1, timeout: float = 30.0, **filters):
    return wait_for(
        lambda: (rows := usage_rows(**filters)) and len(rows) >= count and rows, timeout=timeout
    )


# How long the flush of a transactional test waits on a lock before it looks
# for a deadlock (``_usage_rows_settled``): well past PostgreSQL's default
# second, which the server processes' connections keep.
FLUSH_DEADLOCK_TIMEOUT = "10s"


def _flush_deadlock_timeout(value: str | None) -> None:
    """Set (``None``: reset) ``deadlock_timeout`` on this process's
    connection; only a superuser may, and otherwise nothing changes."""
    from django.db import DatabaseError, connection

    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    statement = "RESET deadlock_timeout" if value is None else f"SET deadlock_timeout = '{value}'"
    with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
        cursor.execute(statement)


@pytest.fixture(autouse=True)
def _usage_rows_settled(request):
    """Before a transactional test's database is flushed, let the server
    processes' writes that are still going on end first.

    Server processes write on after a test has ended: usage rows, and
    whatever a request left to a thread. Such a writer holds the table it
    inserts into (``responses_api_usagelog``) and then, at ``COMMIT``,
    checks its foreign keys against the tables it references; the flush's
    ``TRUNCATE`` locks those first and then waits for the writer's table: a
    deadlock. So:

    - with Redis, wait until their usage writers have committed every row
      (the stream is empty: writers delete entries once committed);
    - without it the rows wait in each server's memory, where nothing here
      can see them: the flush is given a ``deadlock_timeout`` well past the
      servers' (PostgreSQL ends the side whose timeout runs out first, which
      would otherwise be the flush, as it waited first). The writer's
      transaction is then the one ended, which the server treats as a busy
      database (``usage.writer``: the rows are kept and written later).

    The test's database is set up before this fixture (so flushed after
    its end), and the timeout reset for the test's own queries."""
    marker = request.node.get_closest_marker("django_db")
    transactional = bool(marker and marker.kwargs.get("transaction"))
    if transactional:
        request.getfixturevalue("transactional_db")
        _flush_deadlock_timeout(None)
    yield
    if not transactional:
        return
    _flush_deadlock_timeout(FLUSH_DEADLOCK_TIMEOUT)
    if not os.environ.get("REDIS_URL"):
        return
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        # Best effort: a stream that does not empty is left to the flush.
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: not client.xlen(USAGE_STREAM), timeout=10.0)
        # A margin for a row a server is still about to queue (an exchange
        # that ended as the test did), which nothing here can observe.
        time.sleep(0.1)
    finally:
        client.close()


def resolve_locally(host: str, port: int) -> list[str]:
    """Name resolution without a DNS server: ``localhost`` and IP literals
    (numeric forms included) only; any other name does not resolve."""
    if host.lower().rstrip(".") == "localhost":
        return ["127.0.0.1", "::1"]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


@pytest.fixture(autouse=True)
def _no_dns_queries(monkeypatch):
    """Saving a backend looks its host name up (responses_api.backends.
    addresses); no test may send a query to a DNS server, which is not on
    loopback."""
    from responses_api.catalogue import addresses

    monkeypatch.setattr(addresses, "resolve", resolve_locally)


@pytest.fixture(autouse=True)
def _store_loop_closed():
    """The connections stored responses are written on (the event loop's
    own, ``responses_api.store.loop``, and the worker thread's) are closed
    after each test: its loop is gone, and the test database is dropped
    only once nothing holds it."""
    yield
    from django.db import connections

    from responses_api.store import continuation
    from responses_api.store import loop as store_loop

    store_loop.close()
    if continuation._writer.cache_info().currsize:
        continuation._writer().submit(connections.close_all).result()


def pytest_configure(config):
    """The run's first process (``make test``'s, which hands files to the
    workers) starts the vLLM servers the run will use, for the workers to
    find ready (``tests/vllm/launch.py``); it stops them at the end."""
    if hasattr(config, "workerinput") or config.option.collectonly or config.option.help:
        return
    from tests.vllm import launch

    started = launch.start_early(config.args, config.getoption("markexpr"))
    if started:
        config.add_cleanup(lambda: launch.stop(*started))


def pytest_make_parametrize_id(config, val, argname):
    """A gzip member's id without the time gzip writes into its header:
    every pytest-xdist worker must collect the same test ids, and parameters
    compressed at collection would differ by the second each worker reached
    them."""
    if isinstance(val, bytes) and val[:2] == b"\x1f\x8b" and len(val) >= 8:
        stable = val[:4] + bytes(4) + val[8:]
        return stable.decode("ascii", "backslashreplace")
    return None


def pytest_sessionfinish(session, exitstatus):
    """SQLite keeps a dropped test database's ``-wal`` and ``-shm`` files;
    each run's database has a name of its own, so they would pile up."""
    database = settings.DATABASES["default"]
    name = database.get("TEST", {}).get("NAME")
    if not name or not database["ENGINE"].endswith("sqlite3"):
        return
    path = Path(name)
    for leftover in path.parent.glob(path.name + "*"):
        dropped = not leftover.with_name(leftover.name[:-4]).exists()
        if leftover.name.endswith(("-wal", "-shm")) and dropped:
            leftover.unlink(missing_ok=True)


# Fixtures that start server processes: a file using one takes seconds.
_PROCESS_FIXTURES = frozenset({"api_server", "simulator", "web"})
# Folders whose files start real model servers or clients: first of all, so
# that no worker starts one near the end. (vLLM's servers start with the run,
# ``pytest_configure``: its files come after these, when they are ready.)
_HEAVIEST = ("llamacpp", "e2e")


def pytest_collection_modifyitems(config, items):
    """Files with a test marked ``first`` (one that takes half a minute),
    then those that start server processes (real model servers before
    the others), the rest after, each file's
    tests in their order: ``make test``'s workers take a whole file at a
    time, and the run ends when the slowest one does; short files last keep
    them all busy to the end."""
    slow = {
        item.path
        for item in items
        if item.get_closest_marker("live") or _PROCESS_FIXTURES & set(item.fixturenames)
    }
    first = {item.path for item in items if item.get_closest_marker("first")}

    # Within a rank, each folder's files in turn: the files of a folder
    # tend to wait alike (ops/ on timeouts and grace windows, console/ on
    # the processor), and a run that mixes them keeps both cores busy.
    turn: dict[Path, int] = {}
    files_seen: Counter[Path] = Counter()
    for item in items:
        if item.path not in turn:
            turn[item.path] = files_seen[item.path.parent]
            files_seen[item.path.parent] += 1

    def rank(item) -> tuple[bool, bool, int, int]:
        folder = item.path.parent.name
        heaviest = _HEAVIEST.index(folder) if folder in _HEAVIEST else len(_HEAVIEST)
        return item.path not in first, item.path not in slow, heaviest, turn[item.path]

    items.sort(key=rank)
