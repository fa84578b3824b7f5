"""Routing policies against real replicas (``make bench-routing``; bench/README.md, "Routing").

Starts two llama-server replicas of the test model (``stories260K.gguf``),
one web process in front of them, and replays a workload shaped like coding
agents: sessions sharing one system prompt and tool list, each turn sending
the whole history again plus a new message, some sessions forking (a copy
of the history continuing on its own), arrivals interleaved. Each policy
runs on fresh replicas (empty caches) and reports the cache hit rate
(backend-reported ``cached_tokens`` over prompt tokens), the time to first
token at p50 and p99, and the imbalance (max over mean of requests per
replica). Policies:

- ``round-robin``: the client pins requests to the replicas in turn;
- ``least-loaded``: the score with its load term only;
- ``affinity``: Switchyard's routing before scoring: a conversation sticks
  to the backend that served it last while it has a free slot;
- ``scorer``: the score with its default weights;
- ``oracle``: the client pins each session to the replica holding its
  prefix (its previous turn's, its parent's for a fork), new sessions to
  the replica with fewer sessions.

Usage: ``python bench/routing.py [--sessions N] [--turns N] [--write]``
(``--write`` puts the table into bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from run import free_port, gateway_command, manage, start  # noqa: E402

CACHE = Path(os.environ.get("SWITCHYARD_CACHE_DIR") or Path.home() / ".cache" / "switchyard")
LLAMA = Path(os.environ.get("LLAMA_SERVER") or CACHE / "llama-server-0.3.36/bin/llama-server")
# Beside the clone (a worktree may sit a level deeper), as the tests find it.
MODEL = Path(
    os.environ.get("SWITCHYARD_TEST_MODEL")
    or next(
        (p / "shared/models/stories260K.gguf" for p in ROOT.parents if (p / "shared").is_dir()),
        ROOT.parent / "shared/models/stories260K.gguf",
    )
)
SLOTS = 4
POLICIES = {
    "round-robin": {},
    "least-loaded": {
        "SWITCHYARD_ROUTING_PREFIX_WEIGHT": "0",
        "SWITCHYARD_ROUTING_AFFINITY_WEIGHT": "0",
    },
    "affinity": {
        "SWITCHYARD_ROUTING_PREFIX_WEIGHT": "0",
        "SWITCHYARD_ROUTING_AFFINITY_WEIGHT": "100",
    },
    "scorer": {},
    "oracle": {},
}
PINNED = {"round-robin", "oracle"}
SYSTEM = (
    "You are a coding agent working in a repository. Read files before editing them, "
    "keep changes small, run the tests after each change and report what you did. "
)
TOOLS = "Tools: shell(command), read_file(path), apply_patch(patch), search(query). "
# Words of the sessions' own text: a task with the code it is about, then
# tool output each turn, longer than the shared prefix, as in agents' sessions.
WORDS = [
    "def",
    "return",
    "self",
    "value",
    "test",
    "file",
    "error",
    "line",
    "patch",
    "diff",
    "import",
    "class",
    "for",
    "if",
]


@dataclass
class Session:
    name: str
    items: list[dict]
    turns_left: int
    backend: str | None = None


@dataclass
class Result:
    ttft_ms: list[float] = field(default_factory=list)
    prompt: int = 0
    cached: int = 0
    per_backend: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)


def workload(seed: int, sessions: int, turns: int) -> list[tuple[float, Session]]:
    """Sessions and when each arrives: the same for every policy."""
    rng = random.Random(seed)
    at = 0.0
    out = []
    for n in range(sessions):
        at += rng.uniform(0.5, 1.5)
        code = " ".join(rng.choice(WORDS) for _ in range(90))
        first = {"role": "user", "content": f"Task {n}: fix issue #{n} in this code: {code}"}
        items = [{"role": "developer", "content": SYSTEM + TOOLS}, first]
        out.append((at, Session(f"s{n}", items, turns)))
    return out


def step_rng(seed: int, session: Session, turn: int) -> random.Random:
    """A session's own draws at a turn, whatever order the sessions run in."""
    return random.Random(f"{seed}:{session.name}:{turn}")


def follow_up(rng: random.Random, turn: int) -> dict:
    output = " ".join(rng.choice(WORDS) for _ in range(50))
    return {"role": "user", "content": f"Step {turn}: the tool printed {output}. Continue."}


class Runner:
    def __init__(self, policy: str, url: str, key: str, backends: list[str], seed: int) -> None:
        self.policy, self.url, self.key, self.backends = policy, url, key, backends
        self.seed = seed
        self.result = Result()
        self.turn = 0
        self.sessions_on: dict[str, int] = dict.fromkeys(backends, 0)
        self.tasks: list[asyncio.Task] = []

    def pin(self, session: Session) -> str | None:
        if self.policy == "round-robin":
            self.turn += 1
            return self.backends[self.turn % len(self.backends)]
        if self.policy == "oracle":
            if session.backend is None:
                session.backend = min(self.backends, key=lambda b: self.sessions_on[b])
                self.sessions_on[session.backend] += 1
            return session.backend
        return None

    async def request(self, client: httpx.AsyncClient, session: Session) -> str:
        headers = {"authorization": f"Bearer {self.key}"}
        pinned = self.pin(session)
        if pinned:
            headers["x-backend-id"] = pinned
        body = {
            "model": "bench-model",
            "input": session.items,
            "stream": True,
            "max_output_tokens": 12,
            "store": False,
        }
        started = time.perf_counter()
        first = None
        text = ""
        async with client.stream(
            "POST", self.url + "/v1/responses", json=body, headers=headers
        ) as r:
            if r.status_code != 200:
                print(f"{self.policy}: {r.status_code} {(await r.aread())[:300]!r}", flush=True)
                self.result.errors += 1
                self.result.statuses[r.status_code] = self.result.statuses.get(r.status_code, 0) + 1
                return ""
            backend = r.headers.get("x-backend-id", "")
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event["type"] == "response.output_text.delta":
                    first = first or time.perf_counter()
                    text += event["delta"]
                elif event["type"] in ("response.completed", "response.incomplete"):
                    usage = event["response"]["usage"]
                    self.result.prompt += usage["input_tokens"]
                    self.result.cached += usage["input_tokens_details"]["cached_tokens"]
        if first is not None:
            self.result.ttft_ms.append((first - started) * 1000)
        self.result.per_backend[backend] = self.result.per_backend.get(backend, 0) + 1
        if self.policy == "oracle":
            session.backend = backend
        return text

    async def run_session(self, client: httpx.AsyncClient, session: Session, delay: float) -> None:
        await asyncio.sleep(delay)
        turn = 1
        while session.turns_left > 0:
            answer = await self.request(client, session)
            session.turns_left -= 1
            turn += 1
            rng = step_rng(self.seed, session, turn)
            session.items = [
                *session.items,
                {"role": "assistant", "content": answer or "ok"},
                follow_up(rng, turn),
            ]
            if 2 <= turn <= 3 and session.turns_left and rng.random() < 0.3:
                fork = Session(
                    session.name + "f", list(session.items), session.turns_left, session.backend
                )
                if fork.backend:
                    self.sessions_on[fork.backend] += 1
                self.tasks.append(asyncio.create_task(self.run_session(client, fork, 0.0)))
            await asyncio.sleep(rng.uniform(0.05, 0.3))  # the agent runs its tools

    async def run(self, plan: list[tuple[float, Session]]) -> Result:
        async with httpx.AsyncClient(timeout=120) as client:
            self.tasks = [asyncio.create_task(self.run_session(client, s, at)) for at, s in plan]
            while self.tasks:
                batch, self.tasks = self.tasks, []
                await asyncio.gather(*batch)
        return self.result


def start_replicas(logs: Path) -> list:
    replicas = []
    for n in range(2):
        port = free_port()
        argv = [
            str(LLAMA),
            "-m",
            str(MODEL),
            "-a",
            "bench-model",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-t",
            "1",
            "--jinja",
            "--no-webui",
            "-c",
            str(2048 * SLOTS),
            "-np",
            str(SLOTS),
        ]
        replicas.append(start(f"llama{n}", argv, port, os.environ.copy(), logs))
    for replica in replicas:
        deadline = time.monotonic() + 60
        while httpx.get(f"http://127.0.0.1:{replica.port}/health").status_code != 200:
            if time.monotonic() > deadline:
                raise SystemExit(f"{replica.name} did not become healthy")
            time.sleep(0.1)
    return replicas


def provision(env: dict[str, str], replicas: list) -> tuple[str, list[str]]:
    org = f"routing{int(time.time())}"
    manage(env, "create_org", org, "--name", "Routing benchmark")
    for n, replica in enumerate(replicas):
        manage(
            env,
            "add_backend",
            "--org",
            org,
            "--name",
            f"replica{n}",
            "--url",
            f"http://127.0.0.1:{replica.port}/v1",
            "--dialect",
            "llamacpp",
            "--max-concurrency",
            str(SLOTS),
        )
        manage(env, "add_model", "bench-model", "--org", org, "--backend", f"replica{n}")
    key = manage(env, "create_api_key", "--org", org, "--name", "bench").strip().splitlines()[-1]
    ids = manage(
        env,
        "shell",
        "-c",
        "from responses_api.models import Backend;"
        f"print(' '.join(str(b.id) for b in Backend.objects.filter(organisation__slug='{org}')"
        ".order_by('name')))",
    )
    return key.strip(), ids.strip().splitlines()[-1].split()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")


def run_policy(policy: str, args, env: dict[str, str], logs: Path) -> dict:
    replicas = start_replicas(logs)
    web = None
    try:
        key, backends = provision(env, replicas)
        port = free_port()
        web = start(f"web-{policy}", gateway_command(port), port, {**env, **POLICIES[policy]}, logs)
        plan = workload(args.seed, args.sessions, args.turns)
        result = asyncio.run(
            Runner(policy, f"http://127.0.0.1:{port}", key, backends, args.seed).run(plan)
        )
    finally:
        for server in [web, *replicas]:
            if server is not None:
                server.process.terminate()
                server.process.wait(10)
    counts = [result.per_backend.get(b, 0) for b in backends]
    return {
        "policy": policy,
        "requests": sum(counts),
        "errors": result.errors,
        "statuses": result.statuses,
        "hit_rate": result.cached / result.prompt if result.prompt else 0.0,
        "ttft_p50": percentile(result.ttft_ms, 0.5),
        "ttft_p99": percentile(result.ttft_ms, 0.99),
        "imbalance": max(counts) / statistics.mean(counts) if sum(counts) else float("nan"),
        "per_backend": counts,
    }


HEADER = (
    "| policy | requests | cache hit rate | of oracle's | TTFT p50 | TTFT p99 "
    "| imbalance (max/mean) | per replica |"
)


def table(rows: list[dict]) -> str:
    oracle = next((r["hit_rate"] for r in rows if r["policy"] == "oracle"), 0.0)
    lines = [HEADER, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = f"{r['hit_rate'] / oracle:.0%}" if oracle else "–"
        failed = f" ({r['errors']} failed)" if r["errors"] else ""
        per_replica = " / ".join(map(str, r["per_backend"]))
        lines.append(
            f"| {r['policy']} | {r['requests']}{failed} | {r['hit_rate']:.1%} | {share} "
            f"| {r['ttft_p50']:.0f} ms | {r['ttft_p99']:.0f} ms | {r['imbalance']:.2f} "
            f"| {per_replica} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--write", action="store_true", help="put the table into bench/README.md")
    args = parser.parse_args()
    for path, what in (
        (LLAMA, "llama-server (LLAMA_SERVER)"),
        (MODEL, "the model (SWITCHYARD_TEST_MODEL)"),
    ):
        if not path.exists():
            raise SystemExit(f"{what} not found at {path}")
    logs = Path(tempfile.mkdtemp(prefix="bench-routing-"))
    env = os.environ.copy()
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop("REDIS_URL", None)
    env["DATABASE_URL"] = f"sqlite:///{logs / 'routing.sqlite3'}"
    env["SWITCHYARD_CATALOG_CACHE_SECONDS"] = "1"
    manage(env, "migrate", "--noinput")
    rows = []
    for policy in args.policies.split(","):
        row = run_policy(policy, args, env, logs)
        print(json.dumps(row), flush=True)
        rows.append(row)
    text = table(rows)
    print(text)
    if args.write:
        readme = BENCH / "README.md"
        content = readme.read_text()
        start_mark, end_mark = "<!-- routing-table -->", "<!-- /routing-table -->"
        block = f"{start_mark}\n{text}\n{end_mark}"
        if start_mark in content:
            before, rest = content.split(start_mark, 1)
            content = before + block + rest.split(end_mark, 1)[1]
        else:
            content += f"\n{block}\n"
        readme.write_text(content)


if __name__ == "__main__":
    main()
