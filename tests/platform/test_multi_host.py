"""The multi-machine layout of docs/operations/several-machines.md, run for real
on one machine.

A load balancer (nginx with ``platform/nginx/switchyard-multi-host.conf``,
its upstreams pointed at local ports, plain HTTP) in front of two "hosts".
Each host is a release directory, a ``current`` link to it, a metrics
directory and an environment of its own; its web process is started with the
command line of ``platform/systemd/switchyard-web@.service``. Both share one
PostgreSQL and one Redis, as application hosts do. Through the balancer the
console's static files load (they are on the hosts, not on the balancer);
``/metrics`` is scraped from each host directly, the balancer refusing it; and
one host is upgraded the guide's way (link moved to a new release, SIGTERM,
wait, start again) while a client keeps sending requests, each of which ends
200 with the retries the guide prescribes.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, Proc, _log_path, free_port, server_env, wait_http
from tests.platform.test_nginx import _main_conf, _nginx_or_skip

sys.path.insert(0, str(ROOT / "bench"))
import nginx  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

MULTI_HOST = ROOT / "platform" / "nginx" / "switchyard-multi-host.conf"
WEB_UNIT = ROOT / "platform" / "systemd" / "switchyard-web@.service"
CURRENT = "/opt/switchyard/current"
TOKEN = "metrics-token-multi-host-" + uuid.uuid4().hex[:6]


def _shared_stores_or_skip() -> None:
    """Two hosts share their state through PostgreSQL and Redis only: the
    embedded SQLite and in-memory defaults cannot stand for that."""
    missing = [
        name
        for name, prefix in (("DATABASE_URL", "postgres"), ("REDIS_URL", "redis"))
        if not os.environ.get(name, "").startswith(prefix)
    ]
    if missing:
        message = (
            f"two hosts need a shared PostgreSQL and Redis: set {' and '.join(missing)} "
            "(the embedded defaults are per process)"
        )
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _unit_command(port: int, current: Path) -> list[str]:
    """ExecStart of the web unit, with the substitutions systemd makes."""
    (line,) = re.findall(r"(?m)^ExecStart=(.+)$", WEB_UNIT.read_text())
    argv = shlex.split(line)
    assert argv[:2] == ["/bin/sh", "-c"] and CURRENT in argv[2], line
    script = argv[2].replace(CURRENT, str(current)).replace("%i", str(port))
    script = script.replace("${SWITCHYARD_WEB_BIND}", "127.0.0.1").replace("$$", "$")
    return ["/bin/sh", "-c", script]


def _release(root: Path, name: str) -> Path:
    """A release directory as the guide lays one out: the code and its own
    ``venv/`` (here links to this checkout and its virtualenv)."""
    release = root / "releases" / name
    release.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (release / entry.name).symlink_to(entry)
    (release / "venv").symlink_to(Path(sys.prefix))
    return release


def _switch(host_root: Path, release: Path) -> None:
    """Step 2 of the upgrade: the link renamed over the old one."""
    staged = host_root / "current.next"
    staged.symlink_to(release)
    staged.replace(host_root / "current")


@dataclass
class Host:
    name: str
    root: Path
    port: int
    env: dict[str, str]
    proc: Proc | None = None

    def start(self) -> None:
        log = _log_path(f"host-{self.name}")
        process = subprocess.Popen(
            _unit_command(self.port, self.root / "current"),
            cwd="/",
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        self.proc = Proc(process, f"http://127.0.0.1:{self.port}", self.port, log)

    def wait(self) -> None:
        assert self.proc is not None
        wait_http(self.proc.url + "/healthz", proc=self.proc.process)

    def cwd(self) -> Path:
        assert self.proc is not None
        return Path(os.readlink(f"/proc/{self.proc.process.pid}/cwd"))


def _host(tmp_path: Path, name: str) -> Host:
    root = tmp_path / name
    metrics = root / "metrics"
    metrics.mkdir(parents=True)
    _switch(root, _release(root, "r1"))
    env = server_env(
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
        METRICS_TOKEN=TOKEN,
        SWITCHYARD_SHUTDOWN_GRACE_SECONDS="10",
    )
    env.pop("PYTHONPATH", None)
    return Host(name, root, free_port(), env)


def _balancer_conf(prefix: Path, listen: int, hosts: list[Host]) -> str:
    """The shipped file with each of its application hosts replaced by one
    local "host" (one web process each), its own server parameters kept,
    served on plain HTTP."""
    text = MULTI_HOST.read_text()
    (upstream,) = nginx._blocks(text, r"upstream switchyard_web")
    shipped = re.findall(r"(?m)^\s*server (\S+):8000 ([^\n]*)\n", upstream)
    assert len(shipped) >= len(hosts), upstream
    servers = "".join(
        f"    server 127.0.0.1:{host.port} {parameters}\n"
        for host, (_, parameters) in zip(hosts, shipped, strict=False)
    )
    upstream = re.sub(r"(?m)^\s*server \S+ [^\n]*\n", "", upstream).replace(
        "{\n", "{\n" + servers, 1
    )
    (connection_map,) = nginx._blocks(text, r"map \$http_upgrade \$switchyard_connection")
    https = next(b for b in nginx._blocks(text, "server") if "ssl_certificate" in b)
    lines = [line for line in https.splitlines() if not nginx._DROPPED.match(line)]
    lines.insert(1, f"    listen 127.0.0.1:{listen};")
    return _main_conf(prefix, f"{upstream}\n{connection_map}\n" + "\n".join(lines))


def _requests_served(host: Host) -> float:
    """switchyard_requests_total answered 200, scraped from the host itself."""
    assert host.proc is not None
    answer = httpx.get(
        host.proc.url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    return sum(
        sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name == "switchyard_requests_total" and sample.labels.get("status") == "200"
    )


@dataclass
class Client:
    """Sends requests through the balancer until stopped; retries a 503 that
    carries Retry-After, as the OpenAI SDKs do, and nothing else."""

    url: str
    key: str
    static: str
    outcomes: Counter = field(default_factory=Counter)
    retried: int = 0
    sent_at: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def _one(self, http: httpx.Client, kind: str) -> None:
        self.sent_at.append(time.monotonic())
        for _ in range(10):
            try:
                if kind == "api":
                    answer = http.post(
                        self.url + "/v1/responses",
                        headers={"authorization": f"Bearer {self.key}"},
                        json={"model": "sim-model", "input": "hi"},
                    )
                else:
                    answer = http.get(self.url + self.static)
            except httpx.HTTPError as exc:
                self.outcomes[(kind, type(exc).__name__)] += 1
                return
            if answer.status_code == 503 and "retry-after" in answer.headers:
                self.retried += 1
                time.sleep(min(float(answer.headers["retry-after"]), 1.0))
                continue
            self.outcomes[(kind, answer.status_code)] += 1
            return
        self.outcomes[(kind, "gave up")] += 1

    def run(self) -> None:
        # Two API requests to one static file: in strict alternation, the
        # balancer's round robin over two idle hosts would send every API
        # request to the same one.
        with httpx.Client(timeout=30) as http:
            while not self.stop.is_set():
                self._one(http, "api")
                self._one(http, "api")
                self._one(http, "static")


def test_two_hosts_behind_the_balancer(tmp_path, simulator, provision):
    _shared_stores_or_skip()
    _nginx_or_skip()
    hosts = [_host(tmp_path, "app-1"), _host(tmp_path, "app-2")]
    for host in hosts:
        host.start()
    listen = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(_balancer_conf(tmp_path, listen, hosts))
    nginx.check(conf, tmp_path)
    log = _log_path("balancer")
    balancer = Proc(
        subprocess.Popen(
            nginx.command(conf, tmp_path), stdout=log.open("w"), stderr=subprocess.STDOUT
        ),
        f"http://127.0.0.1:{listen}",
        listen,
        log,
    )
    client = None
    try:
        for host in hosts:
            host.wait()
            # The unit's `cd -P`: the process runs in the release, not the link.
            assert host.cwd() == (host.root / "releases" / "r1").resolve()
        wait_http(balancer.url + "/healthz", proc=balancer.process)
        tenant = provision("acme", simulator.url)

        # The console and its static files, through the balancer, which has none.
        page = httpx.get(balancer.url + "/console/login/", timeout=10)
        assert page.status_code == 200, page.text[:300]
        assets = re.findall(r'(?:href|src)="(/static/[^"]+\.(?:css|js))"', page.text)
        assert any(a.endswith(".css") for a in assets) and any(a.endswith(".js") for a in assets)
        for asset in assets:
            answer = httpx.get(balancer.url + asset, timeout=10)
            assert answer.status_code == 200, asset
            assert answer.headers["content-type"].startswith(("text/css", "text/javascript"))

        # Metrics: not through the balancer, from each host directly.
        refused = httpx.get(
            balancer.url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        assert refused.status_code == 404
        before = sum(_requests_served(host) for host in hosts)

        client = Client(balancer.url, tenant.key, next(a for a in assets if a.endswith(".css")))
        traffic = threading.Thread(target=client.run, daemon=True)
        traffic.start()
        time.sleep(1.0)

        # Upgrade app-1: move its link to a new release, then restart its web
        # process. A stream still open on it keeps it draining a while, and it
        # must end whole.
        app1 = hosts[0]
        new_release = _release(app1.root, "r2")
        _switch(app1.root, new_release)
        held: dict[str, object] = {}

        def stream() -> None:
            with httpx.stream(
                "POST",
                app1.proc.url + "/v1/responses",
                headers={"authorization": f"Bearer {tenant.key}"},
                json={"model": "sim-model", "input": "[[rate:5]] [[tokens:10]]", "stream": True},
                timeout=30,
            ) as answer:
                held["status"] = answer.status_code
                held["body"] = answer.read().decode()

        streaming = threading.Thread(target=stream)
        streaming.start()
        time.sleep(0.5)
        # The old process stays in its release after the link moved.
        assert app1.cwd() == (app1.root / "releases" / "r1").resolve()
        stopped_at = time.monotonic()
        app1.proc.process.send_signal(signal.SIGTERM)
        assert app1.proc.process.wait(30) == 0
        app1.start()
        app1.wait()
        back_at = time.monotonic()
        assert app1.cwd() == new_release.resolve()
        streaming.join(30)
        time.sleep(1.0)
        client.stop.set()
        traffic.join(30)

        assert held.get("status") == 200 and "response.completed" in str(held.get("body"))
        during = [t for t in client.sent_at if stopped_at <= t <= back_at]
        assert len(during) >= 3, "the client sent nothing while app-1 restarted"
        failures = {k: n for k, n in client.outcomes.items() if k[1] != 200}
        assert not failures, (failures, client.outcomes)
        api_ok = client.outcomes[("api", 200)]
        # ... and met the restart: a 503 it retried, or a refused connection
        # that the balancer moved to the other host.
        errors = (tmp_path / "error.log").read_text()
        assert client.retried or f"127.0.0.1:{app1.port}" in errors
        assert api_ok >= 10 and client.outcomes[("static", 200)] >= 10

        # Each host counts what it served, across the restart (the counters of
        # the old process stay in app-1's directory): together, every API
        # request answered 200, the held stream included.
        def counted() -> bool:
            return sum(_requests_served(host) for host in hosts) - before == api_ok + 1

        deadline = time.monotonic() + 10
        while not counted() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert counted(), ([_requests_served(h) for h in hosts], before, api_ok)
        assert all(_requests_served(host) > 0 for host in hosts)
    finally:
        if client is not None:
            client.stop.set()
        balancer.stop()
        for host in hosts:
            if host.proc is not None:
                host.proc.stop()
