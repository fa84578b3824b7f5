"""The real Codex CLI compacting a long session on Switchyard (docs/api/compaction.md).

The kit's provider (``codex_config``) is one Codex compacts remotely: with a
low ``model_auto_compact_token_limit``, a session that passes it mid-task
sends ``compaction_trigger``, gets one ``compaction`` item back, and goes on
with that item in its next request, which gives the backend the summary.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from responses_api.translate.compaction import SUMMARY_PREFIX, SUMMARY_PROMPT
from tests.conftest import wait_rows
from tests.e2e.test_codex import (  # noqa: F401 (codex_bin: a fixture)
    APPENDED,
    TOP_LEVEL,
    codex_bin,
    codex_runner,
)

pytestmark = [
    pytest.mark.codex,
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1200),
]

# Far below what Codex's first request takes (its instructions and tools).
COMPACT_LIMIT = 2000


@pytest.fixture
def codex_session(codex_bin, api_server, provision, simulator, tmp_path, settings):  # noqa: F811
    return _session(codex_bin, provision, simulator, tmp_path, settings, api_server)


def _session(binary, provision, simulator, tmp_path, settings, api_server, name=None):
    from django.core.management import call_command

    tenant = provision("acme", simulator.url)
    home = tmp_path / "codex-home"
    settings.SWITCHYARD_PUBLIC_URL = f"http://127.0.0.1:{api_server.port}"
    call_command("codex_config", "--org", "acme", "--key-name", "acme key", "--out", str(home))
    config = home / "config.toml"
    text = config.read_text()
    if name is not None:
        text = text.replace('name = "OpenAI"', f'name = "{name}"')
    config.write_text(TOP_LEVEL + text + APPENDED)
    profile = home / "switchyard.config.toml"
    profile.write_text(profile.read_text() + f"model_auto_compact_token_limit = {COMPACT_LIMIT}\n")
    run = codex_runner(binary, home, tmp_path, tenant.key)
    run.tenant = tenant  # type: ignore[attr-defined]
    return run


def _chat_requests(simulator) -> list[dict]:
    """What the simulator was sent, oldest first."""
    recent = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/requests", timeout=5)
    return list(reversed(recent.json()["data"]))


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def test_codex_compacts_remotely_past_its_threshold_and_keeps_working(codex_session, simulator):
    marker = f"compact-{uuid.uuid4().hex[:8]}"
    result = codex_session(f"Print a marker. [[exec:echo {marker}]]")
    assert result.returncode == 0, result.stderr[-3000:]
    requests = [
        r for r in _chat_requests(simulator) if any(marker in _text(m) for m in r["messages"])
    ]
    summarising = [r for r in requests if _text(r["messages"][-1]) == SUMMARY_PROMPT]
    assert len(summarising) == 1, [_text(r["messages"][-1])[:80] for r in requests]
    # The request after the compaction carries its one item: the summary, exactly.
    after = requests[requests.index(summarising[0]) + 1 :]
    assert after, "Codex sent nothing after the compaction"
    summaries = [m for m in after[0]["messages"] if _text(m).startswith(SUMMARY_PREFIX)]
    assert len(summaries) == 1
    assert marker in _text(summaries[0])  # the simulator's summary names the user's request
    assert "[[exec" not in _text(summaries[0])
    # The task went on after the compaction: the command ran once, and Codex answered.
    assert result.stdout.strip(), result.stderr[-3000:]
    rows = wait_rows(len(requests), organisation=codex_session.tenant.organisation)
    assert all(row.status == 200 for row in rows)
    assert any(row.endpoint == "/responses" and row.output_tokens > 0 for row in rows)


def test_a_provider_codex_does_not_compact_remotely_summarises_on_the_client(
    codex_bin,  # noqa: F811
    api_server,
    provision,
    simulator,
    tmp_path,
    settings,
):
    """The gate the kit's provider name passes: named otherwise, Codex
    writes its own summary turn and Switchyard's compaction is never asked for."""
    run = _session(codex_bin, provision, simulator, tmp_path, settings, api_server, "Switchyard")
    marker = f"local-{uuid.uuid4().hex[:8]}"
    result = run(f"Print a marker. [[exec:echo {marker}]]")
    assert result.returncode == 0, result.stderr[-3000:]
    requests = [
        r for r in _chat_requests(simulator) if any(marker in _text(m) for m in r["messages"])
    ]
    assert len(requests) >= 2
    assert not [r for r in requests if _text(r["messages"][-1]) == SUMMARY_PROMPT]
    assert not [m for r in requests for m in r["messages"] if _text(m).startswith(SUMMARY_PREFIX)]
