"""The real Codex CLI in WebSocket mode (docs/api/websocket.md): the
kit's ``config.toml`` turns it on (``supports_websockets``), and a task's
requests then reach Switchyard as ``response.create`` frames on a socket,
each with its usage row (method ``WS``), instead of HTTP streams."""

from __future__ import annotations

import tomllib
import uuid

import pytest

from tests.conftest import usage_rows, wait_for
from tests.e2e.test_codex import codex, codex_bin  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.codex,
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1200),
]


def test_codex_runs_a_task_over_one_websocket(codex):  # noqa: F811
    config = tomllib.loads((codex.workdir.parent / "codex-home" / "config.toml").read_text())
    assert config["model_providers"]["switchyard"]["supports_websockets"] is True
    marker = f"switchyard-ws-{uuid.uuid4().hex[:8]}"
    result = codex(f"Print a marker. [[exec:echo {marker}]]")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Tool result:" in result.stdout and marker in result.stdout, result.stdout

    # The command's call, then the answer after its output: both over the
    # socket, and no request over HTTP. Codex may prewarm the socket first
    # (generate: false), a row of its own that reached no backend.
    def answered():
        rows = usage_rows(organisation=codex.tenant.organisation)
        return rows if sum(row.backend_id is not None for row in rows) >= 2 else None

    rows = wait_for(answered, timeout=30)
    assert {row.method for row in rows} == {"WS"}, [(r.method, r.endpoint) for r in rows]
    assert all(row.status == 200 and row.endpoint == "/responses" for row in rows)
    assert len(rows) <= 3
