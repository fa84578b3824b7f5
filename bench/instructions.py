"""Instructions per request in the gateway, counted by valgrind's callgrind.

    python bench/instructions.py [--requests 100] [--streams 20] [--paced 3]
    python bench/instructions.py --server-patches all --server-patches -eager_writes ...
    python bench/instructions.py --otel

CPU time moves by ±20 % between runs on a shared machine; the number of
instructions a request executes does not (±0.3 % here, with
``PYTHONHASHSEED`` fixed). This starts the fake backend and one gateway
process under ``valgrind --tool=callgrind`` with instrumentation off, warms
it up, then counts the instructions of N non-streaming requests, of M
200-token streams and of a few 200-token streams paced at 50 tokens/s (one
backend read per token), at concurrency 1, per thread: thread 1 is the event loop
(the request path), thread 2 the usage writer; ``nonstream_store`` repeats the
non-streaming requests in an organisation that stores responses (their writes
have a thread of their own). It compares code versions;
it is not a time: an instruction of C costs less than one of Python's
interpreter, and system calls are not counted. Needs valgrind (Debian's
``valgrind`` package).

``--otel`` counts a gateway that traces every request (to a sink,
``bench/otel_sink.py``) beside one that does not, and ends with the table
of both; the exporter's thread is counted too.

``--server-patches SPEC``, repeated, runs one gateway per value of
``SWITCHYARD_SERVER_PATCHES`` (config/patches.py) in turn against the same
backend and database, and ends with a table of thread 1's counts per
non-streaming request and per token, each against the first SPEC's.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import run_load  # noqa: E402
from run import (  # noqa: E402
    RESULTS,
    Scenario,
    Target,
    bench_env,
    free_port,
    gateway_command,
    otel_stats,
    provision,
    start,
    start_fake_backend,
    start_otel_sink,
    traced_env,
)


def _control(pid: int, *args: str) -> str:
    done = subprocess.run(
        ["callgrind_control", *args, str(pid)], capture_output=True, text=True, check=False
    )
    return done.stdout


def per_thread(report: str) -> list[int]:
    """Instruction counts by thread from ``callgrind_control -e Ir``."""
    return [int(n.replace(",", "")) for n in re.findall(r"Th \d+\s+([\d,]+)", report)]


async def count(target: Target, pid: int, scenario: Scenario, settle: float) -> list[float]:
    load = {
        "host": "127.0.0.1",
        "port": target.port,
        "path": target.path,
        "body": target.body(scenario),
        "headers": target.headers,
        "marker": target.marker,
        "concurrency": 1,
        "timeout": 600,
    }
    await run_load(**load, requests=20)
    await asyncio.sleep(1.0)
    _control(pid, "-i", "on")
    _control(pid, "-z")
    await run_load(**load, requests=scenario.requests)
    await asyncio.sleep(settle)  # the usage writer's flush of these rows (and the spans')
    report = _control(pid, "-e", "Ir")
    _control(pid, "-i", "off")
    return [n / scenario.requests for n in per_thread(report)]


async def measure(
    args,
    env: dict[str, str],
    key: str,
    logs: Path,
    store_key: str | None = None,
    settle: float = 1.0,
) -> dict[str, list[float]]:
    """One gateway under callgrind: its counts per request, by scenario."""
    port = free_port()
    gateway = start(
        "switchyard",
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={logs}/callgrind.out.%p",
            *gateway_command(port),
        ],
        port,
        env,
        logs,
    )
    try:
        target = Target(
            "switchyard",
            port,
            "/v1/responses",
            f"authorization: Bearer {key}\r\n".encode(),
            "responses",
            gateway,
        )
        out = {}
        stored = dataclasses.replace(
            target, headers=f"authorization: Bearer {store_key}\r\n".encode()
        )
        for name, scenario in (
            ("nonstream", Scenario("nonstream", "", False, 16, 1, args.requests)),
            ("nonstream_store", Scenario("nonstream_store", "", False, 16, 1, args.stored)),
            ("stream200", Scenario("stream200", "", True, 200, 1, args.streams)),
            ("paced50", Scenario("paced50", "", True, 200, 1, args.paced, rate=50)),
        ):
            if not scenario.requests:
                continue
            threads = await count(
                stored if name == "nonstream_store" else target, gateway.pid, scenario, settle
            )
            out[name] = threads
            shown = ", ".join(f"thread {i + 1}: {n / 1e6:.3f} M" for i, n in enumerate(threads))
            print(f"{name}: instructions per request: {shown}", flush=True)
        return out
    finally:
        gateway.stop()


def patch_table(results: dict[str, dict[str, list[float]]]) -> str:
    """Thread 1 per request and per token, and each against the first row."""
    columns = [
        ("nonstream", "non-streaming, per request", 1),
        ("stream200", "200-token stream, per token", 200),
        ("paced50", "paced stream, per token", 200),
    ]
    first = next(iter(results.values()))
    shown = [c for c in columns if c[0] in first]
    lines = [
        "| SWITCHYARD_SERVER_PATCHES | " + " | ".join(c[1] for c in shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    for spec, counts in results.items():
        cells = []
        for name, _, tokens in shown:
            n = counts[name][0] / tokens
            base = first[name][0] / tokens
            figure = f"{n / 1e6:.3f} M" if tokens == 1 else f"{n / 1e3:.1f} k"
            cells.append(figure if counts is first else f"{figure} ({(n - base) / base:+.1%})")
        lines.append(f"| `{spec}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def traced_and_not(
    args, env: dict[str, str], key: str, logs: Path, store_key: str
) -> dict[str, dict[str, list[float]]]:
    """One gateway untraced, one tracing every request, one traced but
    sampling none: the event loop's count (thread 1) and all threads' per
    request, against the untraced gateway's. Each waits 6 s after its load
    with the counters on, so that the batch of spans the SDK exports every
    5 s is counted with the requests that made it."""
    sink = start_otel_sink(env, logs)
    traced = traced_env(env, sink)
    runs = {
        "untraced": env,
        "traced": traced,
        "traced, sampled out": {**traced, "OTEL_TRACES_SAMPLER": "always_off"},
    }
    results = {}
    try:
        for name, run_env in runs.items():
            print(f"{name}:", flush=True)
            results[name] = await measure(args, run_env, key, logs, store_key, settle=6.0)
        print(f"the sink received: {otel_stats(sink)}")
    finally:
        sink.stop()
    lines = [
        "| scenario | gateway | event loop | all threads |",
        "|---|---|---|---|",
    ]
    base = results["untraced"]
    for scenario, unit in (
        ("nonstream", "request"),
        ("stream200", "stream"),
        ("paced50", "stream"),
    ):
        if scenario not in base:
            continue
        for name, counts in results.items():
            cells = []
            for on, off in (
                (counts[scenario][0], base[scenario][0]),
                (sum(counts[scenario]), sum(base[scenario])),
            ):
                cells.append(
                    f"{on / 1e6:.3f} M" + ("" if counts is base else f" ({(on - off) / off:+.1%})")
                )
            lines.append(f"| {scenario} (per {unit}) | {name} | {cells[0]} | {cells[1]} |")
    print("\n".join(lines))
    return results


async def main_async(args) -> dict:
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    logs = RESULTS / "instructions-logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = bench_env()
    env.setdefault("PYTHONHASHSEED", "0")
    backend = start_fake_backend(env, logs)
    try:
        key = provision(env, f"http://127.0.0.1:{backend.port}/v1")
        store_key = provision(
            env,
            f"http://127.0.0.1:{backend.port}/v1",
            "bench-store",
            "--retention",
            "store",
            "--store-ttl-hours",
            "1",
        )
        if args.otel:
            return await traced_and_not(args, env, key, logs, store_key)
        if not args.server_patches:
            return await measure(args, env, key, logs, store_key)
        results = {}
        for spec in args.server_patches:
            print(f"SWITCHYARD_SERVER_PATCHES={spec}", flush=True)
            results[spec] = await measure(
                args, {**env, "SWITCHYARD_SERVER_PATCHES": spec}, key, logs, store_key
            )
        print(patch_table(results))
        return results
    finally:
        backend.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100, help="non-streaming requests")
    parser.add_argument(
        "--stored", type=int, default=100, help="non-streaming requests in a store organisation"
    )
    parser.add_argument("--streams", type=int, default=20, help="200-token streams")
    parser.add_argument(
        "--paced", type=int, default=3, help="200-token streams at 50 tokens/s (a read per token)"
    )
    parser.add_argument(
        "--otel", action="store_true", help="count a traced gateway beside an untraced one"
    )
    parser.add_argument(
        "--server-patches",
        action="append",
        metavar="SPEC",
        help="a value of SWITCHYARD_SERVER_PATCHES; repeat to compare (the first is the base)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
