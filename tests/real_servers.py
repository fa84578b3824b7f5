"""Where the real inference servers of the suite (llama.cpp's ``llama-server``,
vLLM) and their model come from, and how a test waits for one to serve.

A server comes from its environment variable or the cache that its install
script fills (``$SWITCHYARD_CACHE_DIR``, else ``~/.cache/switchyard``); the
model from its environment variable or ``shared/models/`` beside the clone.
Missing, the tests are skipped on a developer's machine and fail in CI
(``CI`` set), where ``.ci/run`` installs the servers first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT
from tests.support import wait_until


def cached(variable: str, *parts: str) -> Path:
    """``$variable``, else ``parts`` under the install scripts' cache."""
    if os.environ.get(variable):
        return Path(os.environ[variable])
    cache = os.environ.get("SWITCHYARD_CACHE_DIR") or str(Path.home() / ".cache" / "switchyard")
    return Path(cache, *parts)


def shared_model(variable: str, name: str, present: Callable[[Path], bool]) -> Path:
    """``$variable``, else ``shared/models/name`` beside the clone (CI clones
    next to ``shared/``; a git worktree may sit one level deeper)."""
    if os.environ.get(variable):
        return Path(os.environ[variable])
    for parent in ROOT.parents:
        candidate = parent / "shared" / "models" / name
        if present(candidate):
            return candidate
    return ROOT.parent / "shared" / "models" / name


def missing(what: str, path: Path, hint: str) -> None:
    message = f"{what} not found at {path}: {hint}"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def wait_healthy(
    exited: Callable[[], int | None],
    root: str,
    *,
    name: str,
    output: Callable[[], str],
    timeout: float,
    interval: float = 0.05,
) -> None:
    """Until ``root/health`` answers 200 (503 while a model loads); a server
    that exits meanwhile (``exited()`` gives its status) is an error that
    shows its log."""

    def healthy() -> bool:
        if (status := exited()) is not None:
            raise RuntimeError(f"{name} exited with {status}:\n{output()[-4000:]}")
        try:
            return httpx.get(root + "/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(
        healthy,
        timeout=timeout,
        interval=interval,
        message=lambda: f"{name} did not come up ({output()[-4000:]})",
    )
