"""A real vLLM (CPU build) with a tiny model, as a Switchyard backend.

The interpreter comes from ``$VLLM_PYTHON`` or the venv that
``scripts/install-vllm.sh`` fills; the model from ``$SWITCHYARD_TEST_VLLM_MODEL``
or ``shared/models/stories260K-hf`` beside the clone. Without them the tests
are skipped on a developer's machine and fail in CI (``CI`` set), where
``.ci/run`` installs vLLM first.

vLLM takes tens of seconds to start and 3 GB of memory, so one server serves
the whole run: every vLLM test of generation lives in one module (the suite
spreads modules over workers with ``--dist loadfile``). A vLLM runs one
runner, so embeddings (the pooling runner) have a server of their own. Both
start with the run (``launch``), while the workers do other work.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from tests.real_servers import missing, wait_healthy
from tests.support import WaitTimeout
from tests.vllm.launch import (
    MODEL_DIR,
    SERVERS,
    UPSTREAM_MODEL,
    Launched,
    announced,
    launch,
    paths,
    serve_now,
    stop,
)

START_TIMEOUT = 300


@dataclass
class VllmServer:
    """``url`` is the OpenAI base URL (``…/v1``); ``root`` the server itself;
    ``events`` where it publishes its KV-cache events (it binds, subscribers
    connect); ``model`` its model folder."""

    launched: Launched
    process: subprocess.Popen | None  # None: the run's first process owns it

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.launched.port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    @property
    def events(self) -> str:
        return self.launched.events

    @property
    def model(self) -> str:
        return self.launched.model

    def output(self) -> str:
        log = Path(self.launched.log)
        return log.read_text(errors="replace") if log.exists() else ""

    def exited(self) -> int | None:
        """Its exit status once it has ended (a zombie of the process that
        started it counts), else None."""
        if self.process is not None:
            return self.process.poll()
        try:
            state = Path(f"/proc/{self.launched.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return -1
        return -1 if state in ("Z", "X") else None

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
        if self.process is not None:
            stop((self.process, self.launched))


def _installed() -> None:
    python, model = paths()
    if not (python.is_file() and os.access(python, os.X_OK)):
        missing(
            "vLLM's python",
            python,
            "run `bash scripts/install-vllm.sh` (it prints the path for $VLLM_PYTHON)",
        )
    if not (model / "config.json").is_file():
        missing("the test model", model, f"set SWITCHYARD_TEST_VLLM_MODEL to {MODEL_DIR}")


def serving(name: str) -> VllmServer:
    """The server ``name`` of ``launch.SERVERS`` once it answers its health
    check: the one started early for the run, else one started here."""
    _installed()
    launched = announced(name)
    if launched is not None:
        server = VllmServer(launched, None)
    else:
        options, events = SERVERS[name]
        server = VllmServer(*reversed(launch(name, options, events=events)))

    serve_now(server.launched)
    try:
        wait_healthy(
            server.exited, server.root, name="vLLM", output=server.output,
            timeout=START_TIMEOUT, interval=0.5,
        )  # fmt: skip
    except (WaitTimeout, RuntimeError):
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[VllmServer]:
    """One vLLM for the run, with prefix caching, cached-token usage,
    hermes tool calls and KV-cache events."""
    server = serving("vllm")
    yield server
    server.stop()


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
