"""``model_check`` against a real llama-server, every capability passing.

The server runs stories260K with a ChatML template that renders tools and
opens ``<think>`` on request (``chatml-tools-think.jinja``). In front of it,
``stand_in`` plays a model that follows the check's instructions, by the
prefill technique of the other llama.cpp tests; the tool-call parsing, the
json_schema grammar, the stream, the context-length error and the
cancellation are the server's own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from responses_api.catalogue import catalog
from responses_api.checks.capabilities import NAMES
from responses_api.checks.model_check import run_check, table
from tests.conftest import ROOT, Proc, _log_path, free_port
from tests.llamacpp.conftest import FIXTURES, UPSTREAM_MODEL, LlamaServer, start_llama_server
from tests.support import wait_until

pytestmark = [pytest.mark.llamacpp, pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def llama_check(llama_paths) -> Iterator[LlamaServer]:
    server = start_llama_server(
        llama_paths, "--chat-template-file", str(FIXTURES / "chatml-tools-think.jinja")
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stand_in(llama_check) -> Iterator[Proc]:
    port = free_port()
    log = _log_path("stand-in")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.llamacpp.stand_in", "--upstream", llama_check.root]
        + ["--port", str(port)],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    root = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(root + "/health", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout=20, message="the stand-in did not come up")
    proc = Proc(process, root + "/v1", port, log)
    yield proc
    proc.stop()


def test_every_capability_passes_against_llama_server(stand_in, llama_check):
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    catalog.forget()
    acme, _ = organisation_ensure(slug="acme", name="Acme")
    backend, _ = backend_ensure(
        organisation=acme,
        name="llama",
        base_url=stand_in.url,
        dialect="llamacpp",
    )
    model_ensure(
        organisation=acme,
        public_id="stories",
        backend=backend,
        upstream_name=UPSTREAM_MODEL,
        context_window=2048,
        supports_reasoning=True,
        reasoning_levels=["low", "medium", "high"],
    )
    check = run_check("acme", "stories", "llama", timeout=60)
    verdicts = {r["name"]: r for r in check.results}
    assert set(verdicts) == set(NAMES)
    assert check.passed, table(check)
    assert not any(r["skipped"] for r in check.results), table(check)
    # The server itself saw the client of the cancelled stream go away.
    wait_until(
        lambda: "cancel task" in llama_check.output(),
        timeout=10,
        message="llama-server never cancelled the abandoned request",
    )
    catalog.forget()
