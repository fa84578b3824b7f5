"""Live fixtures for routing: several simulator backends, one or two daphnes.

With ``REDIS_URL`` set (CI), ``web`` is two daphne processes sharing Redis,
and tests alternate between them, so in-flight counts, affinity, suspect
marks and rate limits must hold across processes. Without Redis (the
embedded default is one process) ``web`` is a single daphne.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from tests.conftest import Proc, server_env, start_daphne, start_simulator, wait_for

QUEUE_TIMEOUT = 3.0
KEEPALIVE = 0.5


def redis_configured() -> bool:
    return bool(os.environ.get("REDIS_URL"))


needs_redis = pytest.mark.skipif(
    not redis_configured(),
    reason="cross-process behaviour needs REDIS_URL (and PostgreSQL); CI sets them",
)


def started(count: int, start: Callable[[], Proc]) -> list[Proc]:
    """``count`` processes, started side by side: each takes seconds to come
    up, mostly waiting on its imports."""
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: start(), range(count)))


@dataclass
class Web:
    servers: list[Proc]
    turn: int = field(default=0)

    def next_url(self) -> str:
        """Round-robin over the daphne processes, as a load balancer would."""
        server = self.servers[self.turn % len(self.servers)]
        self.turn += 1
        return server.url


@pytest.fixture(scope="session")
def web(django_db_setup, django_db_blocker) -> Iterator[Web]:
    env = server_env(
        SWITCHYARD_QUEUE_TIMEOUT=str(QUEUE_TIMEOUT),
        SWITCHYARD_KEEPALIVE_SECONDS=str(KEEPALIVE),
        SWITCHYARD_CONNECT_TIMEOUT="2",
    )
    count = 2 if redis_configured() else 1
    servers = started(count, lambda: start_daphne(env))
    yield Web(servers)
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def _sim_processes() -> Iterator[list[Proc]]:
    procs = started(3, start_simulator)
    yield procs
    for proc in procs:
        proc.stop()


@pytest.fixture
def sims(_sim_processes: list[Proc]) -> list[Proc]:
    """Three simulator backends, shared by every routing test: each test
    compares their counters before and after, so it starts only once no
    earlier test's request is still running on them."""
    for sim in _sim_processes:
        wait_for(lambda sim=sim: sim_stats(sim)["in_flight"] == 0, timeout=15)
    return _sim_processes


def sim_stats(sim: Proc) -> dict:
    return httpx.get(sim.url.removesuffix("/v1") + "/_sim/stats", timeout=5).json()


@dataclass
class Fleet:
    """An organisation whose model ``sim-model`` is served by several backends."""

    organisation: object
    backends: list  # Backend rows, in the order of the simulators
    key: str

    def backend_of(self, backend_id: str):
        return next(b for b in self.backends if str(b.id) == backend_id)


@pytest.fixture
def fleet_for(people):
    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    def make(
        sims: list[Proc],
        *,
        org: str = "acme",
        max_concurrency: int = 16,
        **key_options,
    ) -> Fleet:
        organisation = people[org]
        backends = []
        for index, sim in enumerate(sims):
            backend, _ = backend_ensure(
                organisation=organisation,
                name=f"sim{index}",
                base_url=sim.url,
                max_concurrency=max_concurrency,
            )
            model_ensure(
                organisation=organisation,
                public_id="sim-model",
                backend=backend,
                upstream_name="sim-model",
            )
            backends.append(backend)
        _, raw = api_key_create(organisation=organisation, name="routing", **key_options)
        return Fleet(organisation, backends, raw)

    return make


@pytest.fixture(scope="session")
def still_web(django_db_setup, django_db_blocker) -> Iterator[Web]:
    """``web`` whose rate limiter's clock stands still, for tests that count
    requests and tokens against a per-minute limit and must not see the
    window roll over between two requests.

    Waiting for a fresh minute when less than 15 s of it was left cost up
    to 15 s a test. A frozen clock (time-machine) would not reach these
    servers, which are other processes; instead they are started with
    ``SWITCHYARD_TEST_RATE_LIMIT_NOW``, the one instant their rate limiter
    takes for now: the first second of a minute long past, picked at random,
    so that every request counts in the same window (its reset 59 s away)
    and no earlier run's counters (Redis keys name the window) are in it.
    Nothing else in the servers reads that instant."""
    window = int(time.time() // 60) - random.randrange(1_000, 1_000_000)
    env = server_env(SWITCHYARD_TEST_RATE_LIMIT_NOW=str(window * 60 + 1))
    count = 2 if redis_configured() else 1
    servers = started(count, lambda: start_daphne(env))
    yield Web(servers)
    for server in servers:
        server.stop()


class RawRequest:
    """A request over a bare socket, so a test decides exactly when the
    client goes away (``close``) and what it had read by then."""

    def __init__(self, base_url: str, key: str, body: bytes, path: str = "/v1/responses"):
        host, port = base_url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nUser-Agent: raw-test\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.sock.sendall(head + body)
        self.received = b""

    def read_until(self, marker: bytes, timeout: float = 15.0, count: int = 1) -> bytes:
        deadline = time.monotonic() + timeout
        while self.received.count(marker) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{marker!r} not received; got {self.received[-300:]!r}")
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError(f"connection closed before {marker!r}")
            self.received += data
        return self.received

    def close(self) -> float:
        """Close the connection; returns when (wall clock) it was closed."""
        closed_at = time.time()
        self.sock.close()
        return closed_at
