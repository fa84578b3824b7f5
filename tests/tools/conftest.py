"""Real MCP server processes over HTTP: a well-behaved one built on the
``mcp`` SDK (both transports), and a hostile one on raw asyncio."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT, Proc, free_port, wait_http

# The tool loop's tests call the API as the stored-response tests do.
from tests.store.conftest import acme, client, globex, initech, recorder  # noqa: F401
from tests.support import wait_until
from tests.tools.files import store  # noqa: F401

TOKEN = "sk-user-oauth-7f3a9c1e5b2d4f60"


def start_server(module: str, name: str, health: str, *args: str) -> Proc:
    port = free_port()
    directory = ROOT / "tests" / "artifacts" / "logs"
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / f"{name}-{uuid.uuid4().hex[:8]}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", module, str(port), *args],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=os.environ.copy(),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if args:  # over TLS, with a certificate no client trusts: listening is enough
            wait_until(lambda: _listening(port, process), timeout=30)
        else:
            wait_http(url + health, timeout=30, proc=process)
    except BaseException:
        process.kill()
        raise
    return Proc(process, url, port, log)


def _listening(port: int, process: subprocess.Popen) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"the server exited with {process.returncode}")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="session")
def mcp_server() -> Iterator[Proc]:
    server = start_server("tests.tools.servers.mcp_server", "mcp-server", "/health")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hostile_mcp() -> Iterator[Proc]:
    server = start_server("tests.tools.servers.hostile_mcp", "hostile-mcp", "/stats")
    yield server
    server.stop()


def run_alone(coroutine):
    """Run ``coroutine`` on a loop of its own; the tasks still pending on
    that loop once it returned (none, for a client that cleans up) are
    returned with its result."""

    async def main():
        result = await coroutine
        # Callbacks the closing connections scheduled get their turn.
        await asyncio.sleep(0.05)
        current = asyncio.current_task()
        return result, [t for t in asyncio.all_tasks() if t is not current]

    return asyncio.run(main())


@pytest.fixture(scope="session")
def search_api() -> Iterator[Proc]:
    server = start_server("tests.tools.servers.search_api", "search-api", "/health")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def page_server() -> Iterator[Proc]:
    server = start_server("tests.tools.servers.pages", "pages", "/health")
    yield server
    server.stop()
