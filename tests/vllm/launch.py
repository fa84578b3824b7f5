"""Starting the suite's vLLM servers, early.

vLLM takes tens of seconds to import torch and load even the tiny test
model. The run's first process (the one that hands files to ``make test``'s
workers, or the only one) starts every server the vLLM modules use as soon
as it has read its options, while the workers collect and run other files;
``$SWITCHYARD_TEST_VLLM_EARLY`` tells the workers where each one listens,
and that process stops them when the run ends. A run that does not reach
``tests/vllm`` (by its paths or ``-m``) starts none.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.conftest import ROOT, _log_path, free_port
from tests.real_servers import cached, shared_model

VLLM_VERSION = "0.32.0"  # keep in step with scripts/install-vllm.sh
MODEL_DIR = "stories260K-hf"
UPSTREAM_MODEL = "stories260K"
EARLY = "SWITCHYARD_TEST_VLLM_EARLY"
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Launched:
    """A vLLM started and not yet known to serve."""

    pid: int
    port: int
    log: str
    events: str
    model: str
    scratch: str  # its cache, and the KV events' socket


def paths() -> tuple[Path, Path]:
    python = cached("VLLM_PYTHON", f"vllm-{VLLM_VERSION}", "bin", "python")
    model = shared_model(
        "SWITCHYARD_TEST_VLLM_MODEL", MODEL_DIR, lambda path: (path / "config.json").exists()
    )
    return python, model


def installed() -> bool:
    python, model = paths()
    return python.is_file() and os.access(python, os.X_OK) and (model / "config.json").is_file()


def _lowest_priority() -> None:
    os.nice(19)
    # Its new session is a scheduling group of its own (the kernel's
    # autogroup), weighed against the suite's as an equal whatever the nice
    # of its processes: while it starts, the group is lowered too, so that
    # it takes only what the suite leaves. Only where ``serving`` may raise
    # it again (lowering a nice needs root).
    if os.geteuid() == 0:
        with contextlib.suppress(OSError):
            Path("/proc/self/autogroup").write_text("19")


def serve_now(launched: Launched) -> None:
    """A test waits on it: its group back to the suite's weight."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{launched.pid}/autogroup").write_text("0")


def launch(
    name: str, options: list[str], *, events: bool = False
) -> tuple[subprocess.Popen, Launched]:
    """A vLLM API server on a free port serving the test model with
    ``options`` (``events``: publishing its KV-cache events on an ipc://
    socket it binds, so that every web process can connect)."""
    python, model = paths()
    port = free_port()
    log = _log_path(name)
    scratch = tempfile.mkdtemp(prefix=f"sy-{name}-")
    endpoint = f"ipc://{scratch}/events" if events else ""
    if events:
        kv_events = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": endpoint,
            "topic": "kv",
        }
        options = [*options, "--kv-events-config", json.dumps(kv_events)]
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB: the default would take a quarter of memory
        # Its OpenMP thread sleeps between steps instead of spinning on the core
        # it is bound to: the suite's own processes share that core.
        "OMP_WAIT_POLICY": "PASSIVE",
        "KMP_BLOCKTIME": "0",
        "VLLM_CACHE_ROOT": os.path.join(scratch, "cache"),
        "VLLM_NO_USAGE_STATS": "1",
        # The model runs in the engine's process rather than in a worker of
        # its own: one interpreter fewer to import torch and vLLM into.
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
    process = subprocess.Popen(
        [
            str(python),
            *("-m", "vllm.entrypoints.openai.api_server"),
            *("--model", str(model), "--served-model-name", UPSTREAM_MODEL),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"),
            *("--distributed-executor-backend", "uni"),
            *options,
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # At the lowest priority: on a two-core machine its engine would
        # otherwise take a core from the suite's own servers while it
        # generates, and delay them by seconds.
        preexec_fn=_lowest_priority,
    )
    return process, Launched(process.pid, port, str(log), endpoint, str(model), scratch)


# The servers the vLLM modules use: the generation server with prefix
# caching, cached-token usage, hermes tool calls and KV-cache events for the
# whole run; the pooling runner for the embeddings module (a vLLM runs one
# runner).
SERVERS: dict[str, tuple[list[str], bool]] = {
    "vllm": (
        [
            *("--enable-prefix-caching", "--enable-prompt-tokens-details"),
            *("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),
            "--trust-request-chat-template",  # a backend's extra_body may bring one
        ],
        True,
    ),
    "vllm-embed": (
        [
            *("--runner", "pooling", "--convert", "embed"),
            *("--hf-overrides", json.dumps({"is_matryoshka": True})),
        ],
        False,
    ),
}


def wanted(args: list[str], markers: str) -> bool:
    """Whether a run of ``args`` (its paths, ``::`` ids allowed) with the
    ``-m`` expression ``markers`` reaches ``tests/vllm``."""
    if "not vllm" in markers:
        return False
    for arg in args:
        path = Path(arg.split("::", 1)[0]).resolve()
        if path == HERE or HERE in path.parents or path in HERE.parents:
            return True
    return False


def start_early(args: list[str], markers: str) -> list[tuple[subprocess.Popen, Launched]]:
    """Every server of ``SERVERS`` when the run reaches ``tests/vllm`` and
    vLLM is installed (the fixtures skip or fail otherwise, as they say),
    announced in ``$SWITCHYARD_TEST_VLLM_EARLY`` for the workers."""
    if os.environ.get(EARLY) or not wanted(args, markers) or not installed():
        return []
    started = {
        name: launch(name, options, events=events) for name, (options, events) in SERVERS.items()
    }
    os.environ[EARLY] = json.dumps(
        {name: asdict(launched) for name, (_, launched) in started.items()}
    )
    return list(started.values())


def announced(name: str) -> Launched | None:
    """The server ``name`` started early for this run, if it was."""
    early = json.loads(os.environ.get(EARLY) or "{}")
    return Launched(**early[name]) if name in early else None


def stop(*servers: tuple[subprocess.Popen, Launched]) -> None:
    """Stop ``servers``, engine processes and all: a test server keeps
    nothing worth an orderly shutdown, which takes vLLM seconds."""
    for process, _ in servers:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    for process, launched in servers:
        process.wait(10)
        shutil.rmtree(launched.scratch, ignore_errors=True)
