"""A real vLLM (CPU build) with a tiny model, as a Switchyard backend.

The interpreter comes from ``$VLLM_PYTHON`` or the venv that
``scripts/install-vllm.sh`` fills; the model from ``$SWITCHYARD_TEST_VLLM_MODEL``
or ``shared/models/stories260K-hf`` beside the clone. Without them the tests
are skipped on a developer's machine and fail in CI (``CI`` set), where
``.ci/run`` installs vLLM first.

vLLM takes about a minute to start and 3 GB of memory, so one server serves
the whole run: every vLLM test of generation lives in one module (the suite
spreads modules over workers with ``--dist loadfile``). A vLLM runs one
runner, so embeddings (the pooling runner) have a server of their own, for
their module only (``test_vllm_embeddings``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from tests.conftest import Proc, _log_path, free_port
from tests.real_servers import cached, missing, shared_model, wait_healthy
from tests.support import WaitTimeout

VLLM_VERSION = "0.32.0"  # keep in step with scripts/install-vllm.sh
MODEL_DIR = "stories260K-hf"
UPSTREAM_MODEL = "stories260K"
START_TIMEOUT = 300


@dataclass
class VllmServer(Proc):
    """``url`` is the OpenAI base URL (``…/v1``); ``root`` the server itself;
    ``events`` where it publishes its KV-cache events (it binds, subscribers
    connect); ``model`` its model folder."""

    root: str = ""
    events: str = ""
    model: str = ""

    def metric(self, name: str) -> float:
        """A series of the server's /metrics, summed over its labels."""
        text = httpx.get(self.root + "/metrics", timeout=5).text
        values = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith((name + "{", name + " "))
        ]
        assert values, f"{name} missing from /metrics"
        return sum(values)

    def running(self) -> float:
        return self.metric("vllm:num_requests_running")

    def stop(self) -> None:
        # The API server stops its engine process on SIGTERM; whatever is
        # left after that goes with the process group.
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


def _lowest_priority() -> None:
    os.nice(19)


def _paths() -> tuple[Path, Path]:
    python = cached("VLLM_PYTHON", f"vllm-{VLLM_VERSION}", "bin", "python")
    model = shared_model(
        "SWITCHYARD_TEST_VLLM_MODEL", MODEL_DIR, lambda path: (path / "config.json").exists()
    )
    if not (python.is_file() and os.access(python, os.X_OK)):
        missing(
            "vLLM's python",
            python,
            "run `bash scripts/install-vllm.sh` (it prints the path for $VLLM_PYTHON)",
        )
    if not (model / "config.json").is_file():
        missing("the test model", model, f"set SWITCHYARD_TEST_VLLM_MODEL to {MODEL_DIR}")
    return python, model


def start_vllm(tmp_path_factory, name: str, options: list[str], *, events: str = "") -> VllmServer:
    """A vLLM API server on a free port serving the test model with
    ``options``, once it answers its health check."""
    python, model = _paths()
    port = free_port()
    log = _log_path(name)
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB: the default would take a quarter of memory
        # Its OpenMP thread sleeps between steps instead of spinning on the core
        # it is bound to: the suite's own processes share that core.
        "OMP_WAIT_POLICY": "PASSIVE",
        "KMP_BLOCKTIME": "0",
        "VLLM_CACHE_ROOT": str(tmp_path_factory.mktemp(f"{name}-cache")),
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
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # At the lowest priority: on a two-core machine its engine would
        # otherwise take a core from the suite's own servers while it
        # generates, and delay them by seconds.
        preexec_fn=_lowest_priority,
    )
    root = f"http://127.0.0.1:{port}"
    server = VllmServer(
        process, root + "/v1", port, log, root=root, events=events, model=str(model)
    )
    try:
        wait_healthy(
            process, root, name="vLLM", output=server.output, timeout=START_TIMEOUT, interval=1.0
        )
    except WaitTimeout:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory) -> Iterator[VllmServer]:
    """One vLLM for the run, with prefix caching, cached-token usage and
    hermes tool calls."""
    _paths()
    # An ipc:// endpoint: vLLM binds it, so every web process can connect
    # (precise routing), and nothing listens beyond this machine.
    events_dir = tempfile.mkdtemp(prefix="sy-kv-")
    events = f"ipc://{events_dir}/events"
    kv_events = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": events,
        "topic": "kv",
    }
    try:
        server = start_vllm(
            tmp_path_factory,
            "vllm",
            [
                *("--enable-prefix-caching", "--enable-prompt-tokens-details"),
                *("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),
                "--trust-request-chat-template",  # a backend's extra_body may bring one
                *("--kv-events-config", json.dumps(kv_events)),
            ],
            events=events,
        )
    except BaseException:
        shutil.rmtree(events_dir, ignore_errors=True)
        raise
    yield server
    server.stop()
    shutil.rmtree(events_dir, ignore_errors=True)


@dataclass
class VllmTenant:
    organisation: object
    backend: object
    key: str
    client: OpenAI


@pytest.fixture
def vllm_tenant(transactional_db, api_server, vllm_server) -> Callable[..., VllmTenant]:
    """An organisation with a vLLM backend of dialect ``vllm`` serving ``stories``."""
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    def make(
        slug: str = "acme", *, backend_name: str = "vllm", extra_body: dict | None = None
    ) -> VllmTenant:
        organisation, _ = organisation_ensure(slug=slug, name=slug.title())
        backend, _ = backend_ensure(
            organisation=organisation,
            name=backend_name,
            base_url=vllm_server.url,
            dialect="vllm",
            extra_body=extra_body,
        )
        model_ensure(
            organisation=organisation,
            public_id="stories",
            backend=backend,
            upstream_name=UPSTREAM_MODEL,
            context_window=2048,
        )
        _, key = api_key_create(organisation=organisation, name=f"{backend_name} key")
        client = OpenAI(base_url=api_server.url + "/v1", api_key=key, max_retries=0)
        return VllmTenant(organisation, backend, key, client)

    return make
