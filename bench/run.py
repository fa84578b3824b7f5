"""Switchyard's benchmark: the same load, direct to a backend and through the gateway.

    python bench/run.py [--quick] [--slow-seconds 60] [--with-litellm] [--profile SCENARIO] [--otel]

Starts a fake Chat Completions backend, Switchyard under daphne (one process;
PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set, else a bench SQLite
database), provisions an organisation, backend, model and key with the
management commands, then runs every scenario against the backend directly
(chat completions) and through Switchyard (/v1/responses). CPU figures come
from /proc/<pid>/stat of each server process, so they hold on a busy machine.
Writes bench/results/<stamp>.json and .md and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import websocket_mode  # noqa: E402
from loadgen import CHAT_DELTA, RESPONSES_DELTA, Result, run_load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
TICK = os.sysconf("SC_CLK_TCK")
LITELLM_VERSION = "1.108.7"
# The slow streams open over this many seconds (--ramp), not in one burst.
RAMP_SECONDS = 5.0
settings_ = {"ramp": RAMP_SECONDS}


# --- processes -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            out.extend(int(p) for p in task.read_text().split())
    return out


def tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo.extend(_children(p))
    return pids


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its live descendants."""
    total = 0
    for p in tree(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """utime + stime of each thread of one process, by thread name (the
    event loop is the process's own name; the usage writer and the database
    calls run on executor threads)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            label = "event loop" if task.name == str(pid) else name
            out[label] = out.get(label, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak) summed over the process tree, in MB."""
    out = {"rss_mb": 0.0, "peak_rss_mb": 0.0}
    for p in tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out["rss_mb"] += int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    out["peak_rss_mb"] += int(line.split()[1]) / 1024
    return {k: round(v, 1) for k, v in out.items()}


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    # Processes of the gateway's that serve no port (the usage writer):
    # their CPU is the gateway's.
    workers: list[Server] = dataclasses.field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [self.process.pid] + [w.pid for w in self.workers]

    @property
    def web(self) -> list[Server]:
        return [self]

    proxy = None

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Group:
    """Several web processes behind nginx (``--processes N``): the gateway's
    CPU and memory are the processes' sum; nginx's are reported apart."""

    name: str
    web: list[Server]
    proxy: Server
    workers: list[Server] = dataclasses.field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.web[0].pid

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.web] + [w.pid for w in self.workers]

    @property
    def port(self) -> int:
        return self.proxy.port

    def stop(self) -> None:
        self.proxy.stop()
        for server in [*self.web, *self.workers]:
            server.stop()


def start(name: str, argv: list[str], port: int, env: dict[str, str], logs: Path) -> Server:
    """A server, once it listens on ``port`` (0: a process that serves no port)."""
    log = logs / f"{name}.log"
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    if not port:
        return Server(name, process, port, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{name} exited at start; see {log}:\n{log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return Server(name, process, port, log)
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{name} did not start listening on {port}; see {log}")


def realtime() -> bool:
    """Run the load generator at real-time priority, if allowed.

    On two cores, a 200-token burst keeps both busy (the backend writing,
    the gateway relaying), and a load generator woken by the first text
    delta waits for the scheduler's next turn, about 0.75 ms here (measured
    by stamping the gateway's write and the generator's read with the same
    clock): a wait that a client on another machine never has, charged to
    whichever server the burst comes through. At ``SCHED_FIFO`` the
    generator reads what arrives when it arrives. Processes it starts
    afterwards are not real-time (``SCHED_RESET_ON_FORK``), and the servers
    were started before. CPU figures do not depend on it (each process's
    own accounting).
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except (AttributeError, OSError):
        return False
    return True


def bench_env() -> dict[str, str]:
    """The servers' environment: DATABASE_URL/REDIS_URL when set, else a
    bench SQLite database; usage rows on their own Redis stream."""
    env = os.environ.copy()
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("LOG_FORMAT", "json")  # as the deployment manifests log
    env["METRICS_TOKEN"] = METRICS_TOKEN  # the loop-lag histogram, read from /metrics
    if not env.get("DATABASE_URL"):
        data = BENCH / ".data"
        data.mkdir(exist_ok=True)
        env["DATABASE_URL"] = f"sqlite:///{data / 'bench.sqlite3'}"
    env["SWITCHYARD_USAGE_STREAM"] = "switchyard:usage:bench"
    return env


def start_fake_backend(env: dict[str, str], logs: Path) -> Server:
    port = free_port()
    command = [sys.executable, str(BENCH / "fake_backend.py"), "--port", str(port)]
    return start("fake-backend", command, port, env, logs)


def start_otel_sink(env: dict[str, str], logs: Path) -> Server:
    """An OTLP collector stand-in (bench/otel_sink.py) that counts the spans."""
    port = free_port()
    command = [sys.executable, str(BENCH / "otel_sink.py"), "--port", str(port)]
    return start("otel-sink", command, port, env, logs)


def traced_env(env: dict[str, str], sink: Server) -> dict[str, str]:
    """``env`` with traces of every request exported to ``sink``, with the
    SDK's default batching."""
    return {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.port}"}


def otel_stats(sink: Server) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{sink.port}/stats", timeout=10) as answer:
        return json.loads(answer.read())


def gateway_command(port: int) -> list[str]:
    """One web process, started as deployments start it (``config/serve.py``)."""
    return [
        sys.executable,
        "-m",
        "config.serve",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "config.asgi:application",
    ]


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


# --- scenarios -----------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    title: str
    stream: bool
    tokens: int
    concurrency: int
    requests: int
    rate: float = 0.0
    slow: bool = False
    # Through an organisation that stores responses (retention ``store``).
    store: bool = False

    def prompt(self) -> str:
        rate = f" [[rate:{self.rate:g}]]" if self.rate else ""
        return f"[[tokens:{self.tokens}]]{rate} Tell me about foxes."


def scenarios(quick: bool, slow_seconds: float, slow_streams: int) -> list[Scenario]:
    scale = 0.2 if quick else 1.0

    def n(x: int) -> int:
        return max(int(x * scale), 16)

    return [
        Scenario("nonstream_c1", "non-streaming, 16 tokens, concurrency 1", False, 16, 1, n(1500)),
        Scenario(
            "nonstream_c32", "non-streaming, 16 tokens, concurrency 32", False, 16, 32, n(3000)
        ),
        Scenario(
            "nonstream_store_c1",
            "non-streaming, 16 tokens, concurrency 1, stored",
            False,
            16,
            1,
            n(1500),
            store=True,
        ),
        Scenario(
            "nonstream_store_c32",
            "non-streaming, 16 tokens, concurrency 32, stored",
            False,
            16,
            32,
            n(3000),
            store=True,
        ),
        Scenario("stream200_c1", "streaming 200 tokens, concurrency 1", True, 200, 1, n(150)),
        Scenario("stream200_c32", "streaming 200 tokens, concurrency 32", True, 200, 32, n(400)),
        Scenario(
            "stream50tps_c32",
            "streaming 200 tokens at 50 tokens/s, 32 streams",
            True,
            200,
            32,
            64 if not quick else 32,  # 2 rounds of 4 s
            rate=50,
        ),
        Scenario(
            "slow_streams",
            f"{slow_streams} streams at 5 tokens/s for {slow_seconds:g} s",
            True,
            max(int(5 * slow_seconds), 1),
            slow_streams,
            slow_streams,
            rate=5,
            slow=True,
        ),
    ]


@dataclass
class Target:
    name: str
    port: int
    path: str
    headers: bytes
    kind: str  # chat or responses
    server: Server | None  # the gateway process measured (None: direct)

    def body(self, scenario: Scenario) -> bytes:
        if self.kind == "chat":
            request: dict = {
                "model": "sim-model",
                "messages": [{"role": "user", "content": scenario.prompt()}],
                "stream": scenario.stream,
            }
            if scenario.stream:
                request["stream_options"] = {"include_usage": True}
        else:
            request = {"model": "sim-model", "input": scenario.prompt(), "stream": scenario.stream}
        return json.dumps(request).encode()

    @property
    def marker(self):
        return CHAT_DELTA if self.kind == "chat" else RESPONSES_DELTA


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(int(q * len(values)), len(values) - 1)]


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


async def measure(
    target: Target, scenario: Scenario, backend: Server, profile: Path | None = None
) -> dict:
    gateway = target.server
    spy = None
    if profile is not None and gateway is not None:
        spy = subprocess.Popen(  # noqa: ASYNC220 (returns at once)
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--pid",
                str(gateway.pid),
                "--format",
                "raw",
                "--rate",
                "200",
                "--nonblocking",
                "-o",
                str(profile),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(1.0)
    g0 = _cpu(gateway.pids) if gateway else 0.0
    t0 = _threads(gateway.pids) if gateway else {}
    n0 = cpu_seconds(gateway.proxy.pid) if gateway and gateway.proxy else 0.0
    lag0 = loop_lag(gateway) if gateway and target.name in ("switchyard", "floor") else None
    b0 = cpu_seconds(backend.pid)
    l0 = sum(os.times()[:2])
    started = time.perf_counter()
    results: list[Result] = await run_load(
        host="127.0.0.1",
        port=target.port,
        path=target.path,
        body=target.body(scenario),
        headers=target.headers,
        marker=target.marker,
        concurrency=scenario.concurrency,
        requests=scenario.requests,
        keep_gaps=scenario.rate > 0,
        ramp=settings_["ramp"] if scenario.slow else 0.0,
        timeout=scenario.tokens / (scenario.rate or 1000) * 4 + 120,
    )
    wall = time.perf_counter() - started
    g1 = _cpu(gateway.pids) if gateway else 0.0
    t1 = _threads(gateway.pids) if gateway else {}
    n1 = cpu_seconds(gateway.proxy.pid) if gateway and gateway.proxy else 0.0
    lag1 = loop_lag(gateway) if lag0 is not None else None
    b1 = cpu_seconds(backend.pid)
    l1 = sum(os.times()[:2])
    if spy is not None:
        spy.send_signal(2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spy.wait(30)
    ok = [
        r
        for r in results
        if r.status == 200 and (not scenario.stream or r.deltas >= scenario.tokens)
    ]
    tokens = sum(r.deltas for r in results) if scenario.stream else scenario.tokens * len(ok)
    gaps = [g for r in results for g in r.gaps]
    interval = 1.0 / scenario.rate if scenario.rate else None
    errors = [r.error or f"status {r.status}, {r.deltas} deltas" for r in results if r not in ok]
    row = {
        "requests": len(results),
        "ok": len(ok),
        "errors": len(errors),
        "error_sample": errors[:3],
        "wall_s": round(wall, 3),
        "requests_per_s": round(len(ok) / wall, 1),
        "tokens_per_s": round(tokens / wall, 1),
        "latency_p50_ms": ms(pct([r.latency for r in ok], 0.5)),
        "latency_p99_ms": ms(pct([r.latency for r in ok], 0.99)),
        "first_delta_p50_ms": ms(pct([r.first_delta for r in ok if r.first_delta], 0.5)),
        "first_delta_p99_ms": ms(pct([r.first_delta for r in ok if r.first_delta], 0.99)),
        # The 1 % slowest, as [seconds into the run, latency ms] by start:
        # slow requests that started together show a stall, not a queue.
        "slowest": sorted(
            [round(r.started - started, 3), round(r.latency * 1000, 1)]
            for r in sorted(ok, key=lambda r: r.latency)[-max(len(ok) // 100, 1) :]
        ),
        "backend_cpu_ms_per_request": round((b1 - b0) * 1000 / max(len(results), 1), 3),
        "loadgen_cpu_ms_per_request": round((l1 - l0) * 1000 / max(len(results), 1), 3),
    }
    if gateway is not None:
        cpu = g1 - g0
        row["gateway_cpu_s"] = round(cpu, 3)
        row["gateway_cpu_ms_per_request"] = round(cpu * 1000 / max(len(results), 1), 3)
        row["gateway_thread_cpu_ms_per_request"] = {
            name: round((t1[name] - t0.get(name, 0.0)) * 1000 / max(len(results), 1), 3)
            for name in sorted(t1)
            if t1[name] > t0.get(name, 0.0)
        }
        if scenario.stream and tokens:
            row["gateway_cpu_us_per_token"] = round(cpu * 1e6 / tokens, 2)
        row.update(_memory(gateway.pids))
        if gateway.proxy is not None:
            row["nginx_cpu_ms_per_request"] = round((n1 - n0) * 1000 / max(len(results), 1), 3)
        if lag0 is not None and lag1 is not None:
            row.update(lag_summary(lag0, lag1))
    if interval is not None:
        # A gap of 0 is a delta that arrived in the same read as the previous one.
        row["gap_p50_ms"] = ms(pct(gaps, 0.5))
        row["gap_p99_ms"] = ms(pct(gaps, 0.99))
        row["gap_max_ms"] = ms(max(gaps) if gaps else None)
        row["gap_p99_over_interval_ms"] = ms(pct(gaps, 0.99) - interval) if gaps else None
        if scenario.slow:
            # Steady state: once every stream has its first delta, the ramp's
            # burst of new requests is over and only relaying is left.
            firsts = [r.started + r.first_delta for r in results if r.first_delta is not None]
            ramp_end = max(firsts) if firsts else 0.0
            steady = [
                g for r in results for g, t in zip(r.gaps, r.gap_times, strict=True) if t > ramp_end
            ]
            row["ramp_s"] = round(ramp_end - started, 2) if firsts else None
            row["steady_gap_p99_ms"] = ms(pct(steady, 0.99))
            row["steady_gap_max_ms"] = ms(max(steady) if steady else None)
    return row


def _cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(p) for p in pids)


def _threads(pids: list[int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid in pids:
        for name, seconds in thread_cpu_seconds(pid).items():
            out[name] = out.get(name, 0.0) + seconds
    return out


def _memory(pids: list[int]) -> dict[str, float]:
    rows = [memory_mb(p) for p in pids]
    return {k: round(sum(r[k] for r in rows), 1) for k in ("rss_mb", "peak_rss_mb")}


METRICS_TOKEN = "bench-metrics-token"


def loop_lag(gateway) -> dict | None:
    """The cumulative buckets of ``switchyard_event_loop_lag_seconds`` and
    the collector's pause totals by generation (``switchyard_gc_pause_seconds``),
    summed over the web processes (each scraped on its own port)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    lag: dict[float, float] = {}
    gc: dict[str, list[float]] = {}
    for server in gateway.web:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/metrics",
            headers={"authorization": f"Bearer {METRICS_TOKEN}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            return None
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "switchyard_event_loop_lag_seconds_bucket":
                    bound = float(sample.labels["le"])
                    lag[bound] = lag.get(bound, 0.0) + sample.value
                elif sample.name in (
                    "switchyard_gc_pause_seconds_sum",
                    "switchyard_gc_pause_seconds_count",
                ):
                    totals = gc.setdefault(sample.labels["generation"], [0.0, 0.0])
                    totals[sample.name.endswith("_count")] += sample.value
    return {"lag": lag, "gc": gc} if lag else None


def lag_summary(before: dict, after: dict) -> dict:
    """The loop lag during one run: its histogram (ticks per bucket) and the
    p99 as the upper bound of the bucket holding it; and the time the cyclic
    collector held the loop, by generation."""
    bounds = sorted(after["lag"])
    cumulative = [after["lag"][b] - before["lag"].get(b, 0.0) for b in bounds]
    count = cumulative[-1] if cumulative else 0.0
    if not count:
        return {}
    p99 = next(b for b, c in zip(bounds, cumulative, strict=True) if c >= 0.99 * count)
    counts, previous = {}, 0.0
    for bound, c in zip(bounds, cumulative, strict=True):
        counts["+Inf" if bound == float("inf") else f"{bound * 1000:g}"] = int(c - previous)
        previous = c
    gc = {}
    for generation, (total, n) in sorted(after["gc"].items()):
        was = before["gc"].get(generation, [0.0, 0.0])
        gc[generation] = {"ms": round((total - was[0]) * 1000, 2), "collections": int(n - was[1])}
    return {
        "loop_lag_p99_ms": None if p99 == float("inf") else round(p99 * 1000, 3),
        "loop_lag_ticks": int(count),
        "loop_lag_histogram_ms": counts,
        "gc_pauses": gc,
    }


def median_row(rows: list[dict]) -> dict:
    out = dict(rows[-1])
    for key, value in rows[-1].items():
        values = [r.get(key) for r in rows]
        if isinstance(value, int | float) and not isinstance(value, bool) and None not in values:
            out[key] = round(statistics.median(values), 3)
    # Per run, not a median.
    out["slowest"] = [r.get("slowest") for r in rows]
    out["runs"] = len(rows)
    return out


def start_gateway(
    processes: int, env: dict[str, str], logs: Path, writer: str = "process"
) -> Server | Group:
    """One web process on its own, or ``processes`` of them behind nginx.

    With Redis, usage rows are written as the deployment manifests write
    them: by a ``write_usage`` process beside the web processes, whose CPU
    counts as the gateway's (``writer="web"``: by the web processes)."""
    workers = []
    if env.get("REDIS_URL") and writer == "process":
        env = {**env, "SWITCHYARD_USAGE_DRAIN_IN_WEB": "false"}
        command = [sys.executable, "manage.py", "write_usage"]
        workers.append(start("usage-writer", command, 0, env, logs))
    try:
        gateway = _start_web(processes, env, logs)
    except BaseException:
        for worker in workers:
            worker.stop()
        raise
    gateway.workers = workers
    return gateway


def _start_web(processes: int, env: dict[str, str], logs: Path) -> Server | Group:
    if not processes:
        port = free_port()
        return start("switchyard", gateway_command(port), port, env, logs)
    import nginx

    web = []
    try:
        for n in range(processes):
            port = free_port()
            web.append(start(f"switchyard-{n}", gateway_command(port), port, env, logs))
        prefix = logs / "nginx"
        conf = prefix / "nginx.conf"
        listen = free_port()
        prefix.mkdir(exist_ok=True)
        conf.write_text(nginx.config(listen=listen, upstreams=[s.port for s in web], prefix=prefix))
        nginx.check(conf, prefix)
        proxy = start("nginx", nginx.command(conf, prefix), listen, env, logs)
    except BaseException:
        for server in web:
            server.stop()
        raise
    return Group("switchyard", web, proxy)


def start_floor(backend_port: int, env: dict[str, str], logs: Path) -> Server:
    """The server and client stack alone (``bench/floor.py``), served as a web process is."""
    port = free_port()
    command = gateway_command(port)
    command[-1] = "bench.floor:app"
    floor_env = {**env, "FLOOR_BACKEND": f"http://127.0.0.1:{backend_port}"}
    return start("floor", command, port, floor_env, logs)


# --- LiteLLM (optional third column) --------------------------------------------


def litellm_start(backend_port: int, env: dict[str, str], logs: Path) -> tuple[Server, str]:
    venv = BENCH / ".litellm-venv"
    binary = venv / "bin" / "litellm"
    if not binary.exists():
        print(f"installing litellm[proxy]=={LITELLM_VERSION} into {venv} …", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", f"litellm[proxy]=={LITELLM_VERSION}"],
            check=True,
        )
    config = logs / "litellm.yaml"
    # custom_openai: an OpenAI-compatible chat provider without a native Responses
    # API in LiteLLM, so /v1/responses is bridged to the backend's chat completions.
    config.write_text(
        "model_list:\n"
        "  - model_name: sim-model\n"
        "    litellm_params:\n"
        "      model: custom_openai/sim-model\n"
        f"      api_base: http://127.0.0.1:{backend_port}/v1\n"
        "      api_key: none\n"
        "litellm_settings:\n"
        "  drop_params: true\n"
    )
    port = free_port()
    litellm_env = {k: v for k, v in env.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    litellm_env["LITELLM_MASTER_KEY"] = "sk-bench-litellm"
    server = start(
        "litellm",
        [str(binary), "--config", str(config), "--port", str(port), "--num_workers", "1"],
        port,
        litellm_env,
        logs,
    )
    return server, "sk-bench-litellm"


# --- the run ---------------------------------------------------------------------


def provision(env: dict[str, str], backend_url: str, org: str = "bench", *retention: str) -> str:
    """An organisation with the backend and a model, and a new key for it."""
    manage(env, "migrate", "--noinput")
    if retention:
        # Every run starts with an empty store: switching the policy to
        # "none" deletes what earlier runs kept (a store that grows from run
        # to run makes each write dearer than the last).
        manage(env, "create_org", org, "--name", "Benchmark", "--retention", "none")
    manage(env, "create_org", org, "--name", "Benchmark", *retention)
    manage(
        env,
        "add_backend",
        "--org",
        org,
        "--name",
        "bench-backend",
        "--url",
        backend_url,
        "--max-concurrency",
        "0",
    )  # no limit: measure the relay, not the queue
    manage(env, "add_model", "sim-model", "--org", org, "--backend", "bench-backend")
    out = manage(env, "create_api_key", "--org", org, "--name", f"bench-{int(time.time())}")
    return out.strip().splitlines()[-1].strip()


def usage_rows_since(env: dict[str, str], since: float) -> int:
    code = (
        "from datetime import datetime, UTC;"
        "from responses_api.models import UsageLog;"
        f"print(UsageLog.objects.filter(organisation__slug__in=('bench', 'bench-store'), "
        f"created_at__gte=datetime.fromtimestamp({since}, tz=UTC)).count())"
    )
    return int(manage(env, "shell", "-c", code).strip().splitlines()[-1])


async def calibrate(backends: dict[str, Server]) -> dict:
    """CPU per request of each candidate backend and of the load generator."""
    out = {}
    scenario = Scenario("calibrate", "", False, 16, 1, 1000)
    for name, server in backends.items():
        target = Target(name, server.port, "/v1/chat/completions", b"", "chat", None)
        await run_load(
            host="127.0.0.1",
            port=server.port,
            path=target.path,
            body=target.body(scenario),
            headers=b"",
            marker=CHAT_DELTA,
            concurrency=1,
            requests=100,
        )
        row = await measure(target, scenario, server)
        out[name] = {
            "backend_cpu_ms_per_request": row["backend_cpu_ms_per_request"],
            "loadgen_cpu_ms_per_request": row["loadgen_cpu_ms_per_request"],
            "latency_p50_ms": row["latency_p50_ms"],
        }
    return out


async def main_async(args) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logs = RESULTS / f"{stamp}-logs"
    logs.mkdir(parents=True, exist_ok=True)

    env = bench_env()
    mode = ("PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite") + (
        " + Redis" if env.get("REDIS_URL") else " + in-process"
    )

    servers: list[Server] = []
    try:
        fake = start_fake_backend(env, logs)
        servers.append(fake)
        sim_port = free_port()
        sim = start(
            "simulator",
            [sys.executable, "manage.py", "simulator", "--port", str(sim_port)],
            sim_port,
            env,
            logs,
        )
        servers.append(sim)
        print("calibrating the backends and the load generator …", flush=True)
        calibration = await calibrate({"fake_backend": fake, "simulator": sim})
        backend = sim if args.backend == "simulator" else fake
        (fake if backend is sim else sim).stop()

        key = provision(env, f"http://127.0.0.1:{backend.port}/v1")
        backend_url = f"http://127.0.0.1:{backend.port}/v1"
        store_key = provision(
            env, backend_url, "bench-store", "--retention", "store", "--store-ttl-hours", "1"
        )
        since = time.time()
        sink = None
        if args.otel:
            sink = start_otel_sink(env, logs)
            servers.append(sink)
            env = traced_env(env, sink)
            mode += ", traces exported"
        daphne = start_gateway(args.processes, env, logs, args.usage_writer)
        servers.append(daphne)
        port = daphne.port
        targets = [
            Target("direct", backend.port, "/v1/chat/completions", b"", "chat", None),
            Target(
                "switchyard",
                port,
                "/v1/responses",
                f"authorization: Bearer {key}\r\n".encode(),
                "responses",
                daphne,
            ),
        ]
        if args.floor:
            floor = start_floor(backend.port, env, logs)
            servers.append(floor)
            targets.append(Target("floor", floor.port, "/v1/chat/completions", b"", "chat", floor))
        if args.with_litellm:
            try:
                litellm, litellm_key = litellm_start(backend.port, env, logs)
                servers.append(litellm)
                targets.append(
                    Target(
                        "litellm",
                        litellm.port,
                        "/v1/responses",
                        f"authorization: Bearer {litellm_key}\r\n".encode(),
                        "responses",
                        litellm,
                    )
                )
            except (SystemExit, subprocess.CalledProcessError, OSError) as exc:
                print(f"LiteLLM column skipped: {exc}", flush=True)

        # Every server runs by now: the client's priority is its own.
        client = "real-time (SCHED_FIFO)" if args.realtime_client and realtime() else "normal"
        # Warm up: caches, connection pools, code paths.
        through = 0  # requests sent through Switchyard: each must leave a usage row
        for target in targets:
            for warm in (Scenario("w", "", False, 16, 4, 200), Scenario("w", "", True, 50, 4, 100)):
                await run_load(
                    host="127.0.0.1",
                    port=target.port,
                    path=target.path,
                    body=target.body(warm),
                    headers=target.headers,
                    marker=target.marker,
                    concurrency=warm.concurrency,
                    requests=warm.requests,
                )
                if target.name == "switchyard":
                    through += warm.requests
        # The store organisation's path too (its first writes, its key's cache).
        stored_warm = Scenario("w", "", False, 16, 4, 200, store=True)
        await run_load(
            host="127.0.0.1",
            port=port,
            path="/v1/responses",
            body=targets[1].body(stored_warm),
            headers=f"authorization: Bearer {store_key}\r\n".encode(),
            marker=RESPONSES_DELTA,
            concurrency=stored_warm.concurrency,
            requests=stored_warm.requests,
        )
        through += stored_warm.requests

        results: dict[str, dict] = {}
        for scenario in scenarios(args.quick, args.slow_seconds, args.slow_streams):
            if args.only and scenario.name not in args.only:
                continue
            repeats = 1 if scenario.slow or scenario.rate else args.repeat
            print(f"· {scenario.title} ({repeats}×)", flush=True)
            # LiteLLM needs ~1 ms of CPU per token: 1,000 slow streams would
            # want several cores, so it sits that scenario out.
            runnable = [
                t
                for t in targets
                if not (scenario.slow and t.name == "litellm")
                and not (scenario.store and t.name in ("litellm", "floor"))
            ]
            per_target: dict[str, list[dict]] = {t.name: [] for t in runnable}
            for _ in range(repeats):
                for target in runnable:
                    if scenario.store and target.name == "switchyard":
                        target = dataclasses.replace(
                            target, headers=f"authorization: Bearer {store_key}\r\n".encode()
                        )
                    profile = None
                    if args.profile == scenario.name and target.name == "switchyard":
                        profile = RESULTS / f"{stamp}-profile-{scenario.name}.txt"
                    row = await measure(target, scenario, backend, profile)
                    per_target[target.name].append(row)
                    if target.name == "switchyard":
                        through += row["requests"]
            results[scenario.name] = {
                "title": scenario.title,
                "scenario": scenario.__dict__,
                **{name: median_row(rows) for name, rows in per_target.items()},
            }
            print(
                "  " + "  ".join(f"{n}: {_brief(results[scenario.name][n])}" for n in per_target),
                flush=True,
            )

        sockets = None
        if not args.only or "websocket" in args.only:
            sockets = {}
            for concurrency in (1, 8):
                print(f"· WebSocket mode against SSE, concurrency {concurrency}", flush=True)
                sockets[f"c{concurrency}"] = compared = await websocket_mode.compare(
                    port=port,
                    key=key,
                    cpu=lambda: _cpu(daphne.pids),
                    turns=60 if args.quick else 600,
                    concurrency=concurrency,
                    tokens=16,
                )
                through += sum(run["turns"] for run in compared.values())
                print("  " + json.dumps(compared), flush=True)

        # Once the last exchanges have ended (their usage rows, the memory
        # given back after a burst: responses_api/runtime/memory.py).
        await asyncio.sleep(2.0)
        gateway_memory = _memory(daphne.pids)
        # The RSS target is per web process.
        gateway_memory["rss_mb_per_process"] = max(memory_mb(p)["rss_mb"] for p in daphne.pids)
        rows = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = usage_rows_since(env, since - 1)
            if rows >= through:
                break
            await asyncio.sleep(1.0)
        return {
            "stamp": stamp,
            "mode": mode,
            "processes": args.processes,
            "usage_writer": args.usage_writer if env.get("REDIS_URL") else "web",
            "quick": args.quick,
            "backend": args.backend,
            "calibration": calibration,
            "scenarios": results,
            "websocket": sockets,
            "gateway_memory_after_run": gateway_memory,
            "usage_rows": {"expected": through, "found": rows},
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "client_priority": client,
            # Spans received by the sink: five per request served.
            "otel": otel_stats(sink) if sink is not None else None,
        }
    finally:
        for server in reversed(servers):
            server.stop()


def _brief(row: dict) -> str:
    parts = [f"{row['requests_per_s']} req/s", f"p50 {row['latency_p50_ms']} ms"]
    if "gateway_cpu_ms_per_request" in row:
        parts.append(f"cpu {row['gateway_cpu_ms_per_request']} ms/req")
        threads = row.get("gateway_thread_cpu_ms_per_request") or {}
        if len(threads) > 1:
            parts.append("(" + ", ".join(f"{n} {v}" for n, v in threads.items()) + ")")
    if row["errors"]:
        parts.append(f"{row['errors']} errors")
    return ", ".join(parts)


# --- report ------------------------------------------------------------------------


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def _added(row: dict, direct: dict, key: str) -> float | None:
    if row.get(key) is None or direct.get(key) is None:
        return None
    return round(row[key] - direct[key], 3)


def verdict(report: dict) -> list[tuple[str, str, str, bool | None]]:
    s = report["scenarios"]
    out = []

    def get(name: str, target: str, key: str):
        return s.get(name, {}).get(target, {}).get(key)

    cpu_req = [
        get(n, "switchyard", "gateway_cpu_ms_per_request")
        for n in ("nonstream_c1", "nonstream_c32")
    ]
    cpu_req = [c for c in cpu_req if c is not None]
    if cpu_req:
        out.append(
            (
                "CPU per non-streaming request (worst of c1/c32)",
                f"{max(cpu_req):.3g} ms",
                "≤ 1.8 ms",
                max(cpu_req) <= 1.8,
            )
        )
    # What storing a response adds (target ≤ 0.3 ms of CPU, bench/README.md).
    for zdr, stored in (
        ("nonstream_c1", "nonstream_store_c1"),
        ("nonstream_c32", "nonstream_store_c32"),
    ):
        base, kept = (get(n, "switchyard", "gateway_cpu_ms_per_request") for n in (zdr, stored))
        if base is not None and kept is not None:
            out.append(
                (
                    f"CPU added by storing the response ({stored.rsplit('_', 1)[1]})",
                    f"{kept - base:.3g} ms",
                    "≤ 0.3 ms",
                    kept - base <= 0.3,
                )
            )
    # As in the LiteLLM figure (129 ms for a 200-token stream): the
    # whole stream's CPU over its tokens, on the fast 200-token streams.
    cpu_tok = [
        get(n, "switchyard", "gateway_cpu_us_per_token") for n in ("stream200_c1", "stream200_c32")
    ]
    cpu_tok = [c for c in cpu_tok if c is not None]
    if cpu_tok:
        out.append(
            (
                "CPU per relayed token, 200-token streams (worst of c1/c32)",
                f"{max(cpu_tok):.3g} µs",
                "≤ 40 µs",
                max(cpu_tok) <= 40,
            )
        )
    paced = get("stream50tps_c32", "switchyard", "gateway_cpu_us_per_token")
    if paced is not None:
        out.append(
            (
                "CPU per relayed token at 50 tokens/s (one token per read; no target)",
                f"{paced:.3g} µs",
                "–",
                None,
            )
        )
    if "nonstream_c1" in s:
        added = _added(
            s["nonstream_c1"]["switchyard"], s["nonstream_c1"]["direct"], "latency_p50_ms"
        )
        if added is not None:
            out.append(
                ("added latency p50, non-streaming, c1", f"{added:.3g} ms", "≤ 2 ms", added <= 2)
            )
    if "stream200_c1" in s:
        added = _added(
            s["stream200_c1"]["switchyard"], s["stream200_c1"]["direct"], "first_delta_p50_ms"
        )
        if added is not None:
            out.append(
                ("added time to first text delta p50, c1", f"{added:.3g} ms", "≤ 2 ms", added <= 2)
            )
    for name, key, what in (
        ("nonstream_c32", "latency_p99_ms", "added latency p99, non-streaming, c32"),
        ("stream200_c32", "first_delta_p99_ms", "added time to first text delta p99, c32"),
    ):
        if name in s:
            added = _added(s[name]["switchyard"], s[name]["direct"], key)
            if added is not None:
                out.append((what, f"{added:.3g} ms", "≤ 25 ms", added <= 25))
            floor = s[name].get("floor")
            if added is not None and floor is not None:
                # Informative: what the server and client alone add (--floor).
                stack = _added(floor, s[name]["direct"], key)
                out.append((f"{what}, the floor alone", f"{_fmt(stack)} ms", "–", None))
    # The gateway's against the target; the floor's beside it, informative.
    for target, what, bound in (("switchyard", "", 10), ("floor", ", the floor alone", None)):
        lags = [
            get(n, target, "loop_lag_p99_ms")
            for n in ("nonstream_c32", "stream200_c32", "stream50tps_c32")
            if n in s and s[n].get(target)
        ]
        if not lags:
            continue
        worst = None if None in lags else max(lags)
        out.append(
            (
                f"event-loop lag p99 under the c32 scenarios (worst; bucket upper bound){what}",
                f"{_fmt(worst)} ms" if worst is not None else "over 2.5 s",
                f"≤ {bound} ms" if bound else "–",
                (worst is not None and worst <= bound) if bound else None,
            )
        )
    memory = report["gateway_memory_after_run"]
    rss = memory.get("rss_mb_per_process", memory["rss_mb"])
    out.append(
        (
            "RSS of the gateway process after the run (the largest, with several)",
            f"{rss:.0f} MB (peak {report['gateway_memory_after_run']['peak_rss_mb']:.0f})",
            "≤ 150 MB",
            rss <= 150,
        )
    )
    if "slow_streams" in s:
        via, direct = s["slow_streams"]["switchyard"], s["slow_streams"]["direct"]
        complete = via["ok"] == via["requests"]
        added = _added(via, direct, "gap_p99_ms")
        out.append(
            (
                f"slow streams: {via['ok']}/{via['requests']} complete; added p99 gap, whole run",
                f"{_fmt(added)} ms",
                "all; ≤ 50 ms",
                complete and added is not None and added <= 50,
            )
        )
        steady = _added(via, direct, "steady_gap_p99_ms")
        out.append(
            (
                "slow streams: added p99 gap once all streams are open",
                f"{_fmt(steady)} ms",
                "≤ 50 ms",
                steady is not None and steady <= 50,
            )
        )
    for level, runs in (report.get("websocket") or {}).items():
        ws, sse = runs["websocket"], runs["sse"]
        out.append(
            (
                f"CPU per turn over WebSocket against SSE, same request, {level} "
                "(permessage-deflate: informative)",
                f"{ws['gateway_cpu_ms_per_turn']:.3g} ms against "
                f"{sse['gateway_cpu_ms_per_turn']:.3g} (deflate "
                f"{runs['websocket_deflate']['gateway_cpu_ms_per_turn']:.3g})",
                "≤ SSE, to the CPU clock's resolution",
                ws["gateway_cpu_ms_per_turn"]
                <= sse["gateway_cpu_ms_per_turn"] + sse["resolution_ms_per_turn"],
            )
        )
    if conversation := (report.get("websocket") or {}).get("c1"):
        out.append(
            (
                "CPU per turn of a 40-turn conversation: WebSocket continuing on the "
                "socket against SSE resending it (ZDR)",
                f"{conversation['conversation_websocket']['gateway_cpu_ms_per_turn']:.3g} ms "
                f"against {conversation['conversation_sse']['gateway_cpu_ms_per_turn']:.3g}",
                "–",
                None,
            )
        )
    usage = report["usage_rows"]
    out.append(
        (
            "usage rows written for the gateway's requests",
            f"{usage['found']}/{usage['expected']}",
            "all",
            usage["found"] >= usage["expected"],
        )
    )
    return out


def _processes(report: dict) -> str:
    n = report.get("processes") or 0
    web = f"{n} web processes behind nginx" if n else "one web process"
    if report.get("usage_writer") == "process":
        return web + " and a usage writer"
    return web


def markdown(report: dict) -> str:
    targets = [
        t
        for t in ("direct", "floor", "switchyard", "litellm")
        if any(t in v for v in report["scenarios"].values())
    ]
    lines = [
        f"## Switchyard benchmark {report['stamp']} ({report['mode']}, "
        f"{_processes(report)}, backend: "
        f"{report['backend']}{', quick' if report['quick'] else ''}, "
        f"load generator at {report.get('client_priority', 'normal')} priority)",
        "",
        "| scenario | target | req/s | p50 ms | p99 ms | 1st delta p50 ms | 1st delta p99 ms "
        "| gateway CPU ms/req | gateway CPU µs/token | nginx CPU ms/req | backend CPU ms/req "
        "| p99 gap ms | loop lag p99 ms | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scenario in report["scenarios"].values():
        for target in targets:
            row = scenario.get(target)
            if row is None:
                continue
            lines.append(
                f"| {scenario['title']} | {target} | {_fmt(row['requests_per_s'])} | "
                f"{_fmt(row['latency_p50_ms'])} | {_fmt(row['latency_p99_ms'])} | "
                f"{_fmt(row['first_delta_p50_ms'])} | {_fmt(row['first_delta_p99_ms'])} | "
                f"{_fmt(row.get('gateway_cpu_ms_per_request'))}"
                f" | {_fmt(row.get('gateway_cpu_us_per_token'))} | "
                f"{_fmt(row.get('nginx_cpu_ms_per_request'))} | "
                f"{_fmt(row['backend_cpu_ms_per_request'])} | {_fmt(row.get('gap_p99_ms'))} | "
                f"{_fmt(row.get('loop_lag_p99_ms'))} | {row['errors']} |"
            )
    lines += ["", "| target measure | measured | target | met |", "|---|---|---|---|"]
    for name, value, goal, met in verdict(report):
        shown = "–" if met is None else "yes" if met else "NO"
        lines.append(f"| {name} | {value} | {goal} | {shown} |")
    lines += [
        "",
        "Backend and load-generator calibration (CPU ms per non-streaming request, c1):",
        "",
    ]
    for name, row in report["calibration"].items():
        lines.append(
            f"- {name}: backend {row['backend_cpu_ms_per_request']} ms, "
            f"load generator {row['loadgen_cpu_ms_per_request']} ms, "
            f"p50 {row['latency_p50_ms']} ms"
        )
    for name, scenario in report["scenarios"].items():
        for target in ("switchyard", "floor"):
            row = scenario.get(target) or {}
            histogram = row.get("loop_lag_histogram_ms")
            if not histogram:
                continue
            shown = ", ".join(f"≤{b}: {n}" for b, n in histogram.items() if n)
            pauses = ", ".join(
                f"gen {g} {v['collections']}× {v['ms']} ms"
                for g, v in (row.get("gc_pauses") or {}).items()
                if v["collections"]
            )
            whose = "" if target == "switchyard" else " (the floor)"
            lines.append(
                f"- event-loop lag ticks (ms) in {name}{whose}: {shown}; collections: {pauses}"
            )
    memory = report["gateway_memory_after_run"]
    lines.append(
        f"- gateway memory after the run: RSS {memory['rss_mb']} MB, "
        f"peak {memory['peak_rss_mb']} MB"
    )
    if otel := report.get("otel"):
        lines.append(
            f"- traces: the sink received {otel['spans']} spans in {otel['exports']} exports "
            f"({otel['bytes'] / 1e6:.1f} MB)"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, 5 s of slow streams")
    parser.add_argument(
        "--slow-seconds",
        type=float,
        default=None,
        help="duration of the slow streams (default 60, 5 with --quick)",
    )
    parser.add_argument("--slow-streams", type=int, default=1000)
    parser.add_argument(
        "--ramp",
        type=float,
        default=RAMP_SECONDS,
        help="seconds over which the slow streams open (default 5)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs per fast scenario, medians reported (default 3, 1 with --quick)",
    )
    parser.add_argument("--backend", choices=("fake", "simulator"), default="fake")
    parser.add_argument(
        "--with-litellm",
        action="store_true",
        help=f"add LiteLLM Proxy {LITELLM_VERSION} as a third column",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="add the server and client stack with no gateway work (bench/floor.py) as a column",
    )
    parser.add_argument("--only", nargs="*", help="run only these scenarios")
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="serve from N web processes behind nginx, configured as platform/nginx "
        "configures it (default: one process, no proxy)",
    )
    parser.add_argument(
        "--usage-writer",
        choices=("process", "web"),
        default="process",
        help="with Redis: usage rows written by a write_usage process (as deployed; "
        "the default) or by the web processes",
    )
    parser.add_argument(
        "--normal-priority-client",
        dest="realtime_client",
        action="store_false",
        help="leave the load generator at normal priority (see realtime())",
    )
    parser.add_argument("--profile", help="record a py-spy profile of this scenario's gateway run")
    parser.add_argument(
        "--otel",
        action="store_true",
        help="trace every request (OTEL_EXPORTER_OTLP_ENDPOINT) to a sink of its own",
    )
    args = parser.parse_args()
    if args.slow_seconds is None:
        args.slow_seconds = 5.0 if args.quick else 60.0
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    settings_["ramp"] = args.ramp
    try:
        import uvloop

        report = uvloop.run(main_async(args))
    except ImportError:
        report = asyncio.run(main_async(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    base = RESULTS / report["stamp"]
    base.with_suffix(".json").write_text(json.dumps(report, indent=2))
    table = markdown(report)
    base.with_suffix(".md").write_text(table)
    shutil.copy(base.with_suffix(".json"), RESULTS / "latest.json")
    (RESULTS / "latest.md").write_text(table)
    print()
    print(table)
    print(f"written: {base}.json, {base}.md")


if __name__ == "__main__":
    main()
