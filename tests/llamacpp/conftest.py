"""A real llama.cpp ``llama-server`` with a tiny model, as a Switchyard backend.

The binary comes from ``$LLAMA_SERVER`` or the cache that
``scripts/build-llama-server.sh`` fills; the model from
``$SWITCHYARD_TEST_MODEL`` or ``shared/models/stories260K.gguf`` beside the
clone. Without them the tests are skipped on a developer's machine and fail
in CI (``CI`` set), where ``.ci/run`` builds the binary first.

Each server starts in a fraction of a second, so there is one per
configuration (chat template, context size) for the whole session.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from openai import OpenAI

from tests.conftest import ROOT, Proc, _log_path, free_port
from tests.real_servers import cached, missing, shared_model, wait_healthy
from tests.support import WaitTimeout

LLAMA_VERSION = "0.3.36"  # keep in step with scripts/build-llama-server.sh
MODEL_FILE = "stories260K.gguf"
UPSTREAM_MODEL = "stories260K"
FIXTURES = ROOT / "tests" / "fixtures" / "llamacpp"
# EOS of stories260K is token 2; +100 makes it the next token, so generation
# stops right after a prefilled tool call (see tests/fixtures/llamacpp/README.md).
FORCE_EOS = {"logit_bias": {"2": 100}}


@pytest.fixture(scope="session")
def llama_paths() -> tuple[Path, Path]:
    binary = cached("LLAMA_SERVER", f"llama-server-{LLAMA_VERSION}", "bin", "llama-server")
    model = shared_model("SWITCHYARD_TEST_MODEL", MODEL_FILE, Path.exists)
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        missing(
            "llama-server",
            binary,
            "run `bash scripts/build-llama-server.sh` (it prints the path for $LLAMA_SERVER)",
        )
    if not model.is_file():
        missing("the test model", model, "set SWITCHYARD_TEST_MODEL to stories260K.gguf")
    return binary, model


@dataclass
class LlamaServer(Proc):
    """``url`` is the OpenAI base URL (``…/v1``); ``root`` the server itself."""

    root: str = ""

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def start_llama_server(paths: tuple[Path, Path], *args: str) -> LlamaServer:
    binary, model = paths
    port = free_port()
    log = _log_path("llama-server")
    process = subprocess.Popen(
        [
            str(binary),
            *("-m", str(model), "-a", UPSTREAM_MODEL),
            *("--host", "127.0.0.1", "--port", str(port)),
            # One thread: ggml's threads spin at each step's barrier, and
            # beside the suite's other workers a second thread waits for a
            # core at every token (the tiny model gains nothing from it).
            *("-t", "1", "--jinja", "--no-webui"),
            *args,
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,  # its log (e.g. "cancel task") goes to stderr
    )
    root = f"http://127.0.0.1:{port}"
    server = LlamaServer(process, root + "/v1", port, log, root=root)

    try:
        wait_healthy(process.poll, root, name="llama-server", output=server.output, timeout=30)
    except WaitTimeout:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def llama_plain(llama_paths) -> Iterator[LlamaServer]:
    """The GGUF's own chat template, 2048 tokens of context."""
    server = start_llama_server(llama_paths)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_small(llama_paths) -> Iterator[LlamaServer]:
    """256 tokens of context: long inputs are refused with a 400."""
    server = start_llama_server(llama_paths, "-c", "256")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_tools(llama_paths) -> Iterator[LlamaServer]:
    """A ChatML template that renders tools and parses <tool_call> blocks."""
    server = start_llama_server(
        llama_paths, "--chat-template-file", str(FIXTURES / "chatml-tools.jinja")
    )
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_think(llama_paths) -> Iterator[LlamaServer]:
    """A template that opens <think>; the server leaves the tags in the text
    (``--reasoning-format none``) unless the request asks it to split them."""
    server = start_llama_server(
        llama_paths,
        "--chat-template-file",
        str(FIXTURES / "chatml-think.jinja"),
        "--reasoning-format",
        "none",
    )
    yield server
    server.stop()


@dataclass
class LlamaTenant:
    organisation: object
    backend: object
    key: str
    client: OpenAI


@pytest.fixture
def llama_tenant(transactional_db, api_server) -> Callable[..., LlamaTenant]:
    """Acme with a llama-server backend of dialect ``llamacpp`` serving ``model``.

    No people: these tests need only an organisation and a key (and the
    password hashing of the ``people`` fixture is slow on a loaded machine).
    """
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    def make(
        server: LlamaServer,
        *,
        model: str = "stories",
        backend_name: str = "llama",
        extra_body: dict | None = None,
    ) -> LlamaTenant:
        acme, _ = organisation_ensure(slug="acme", name="Acme")
        backend, _ = backend_ensure(
            organisation=acme,
            name=backend_name,
            base_url=server.url,
            dialect="llamacpp",
            extra_body=extra_body,
        )
        model_ensure(
            organisation=acme, public_id=model, backend=backend, upstream_name=UPSTREAM_MODEL
        )
        _, key = api_key_create(organisation=acme, name=f"{backend_name} key")
        client = OpenAI(base_url=api_server.url + "/v1", api_key=key, max_retries=0)
        return LlamaTenant(acme, backend, key, client)

    return make
