"""The real Codex CLI against Switchyard and the simulator (docs/api/codex.md).

The binary comes from ``scripts/install-codex.sh`` (npm). Without it the tests
skip, except under CI (``CI=true``), where the script is run and a missing
binary is a failure.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, usage_rows, wait_for, wait_rows
from tests.tools.conftest import search_api  # noqa: F401  (the fake search provider)

pytestmark = [
    pytest.mark.codex,
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    # Under CI the first test installs the Codex CLI with npm (up to 900 s,
    # see codex_bin), then each test runs it once (up to 180 s).
    pytest.mark.timeout(1200),
]


def _cache_binary() -> Path:
    cache = Path(os.environ.get("SWITCHYARD_CACHE_DIR") or Path.home() / ".cache" / "switchyard")
    return cache / "codex" / "node_modules" / ".bin" / "codex"


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    explicit = os.environ.get("SWITCHYARD_CODEX_BIN")
    if explicit and Path(explicit).is_file():
        return Path(explicit)
    in_ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    if in_ci:
        result = subprocess.run(
            ["bash", str(ROOT / "scripts" / "install-codex.sh")],
            capture_output=True,
            text=True,
            timeout=900,
        )
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines or not Path(lines[-1]).is_file():
            pytest.fail(f"CI: could not install the Codex CLI:\n{result.stderr[-2000:]}")
        return Path(lines[-1])
    binary = _cache_binary()
    if not binary.is_file():
        pytest.skip(
            f"Codex CLI not installed at {binary}: run scripts/install-codex.sh "
            "(or set SWITCHYARD_CODEX_BIN)"
        )
    return binary


# Test-only settings, added to the files `manage.py codex_config` writes: no
# prompts, no sandbox, no retries, and no look-ups of hosts other than Switchyard.
TOP_LEVEL = """\
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

"""
# config.toml ends with the provider's table, so these lines extend it.
APPENDED = """\
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 30000

[analytics]
enabled = false

[features]
plugins = false
unbounded_connection_retries = false
"""


@pytest.fixture
def codex(codex_bin, api_server, provision, simulator, tmp_path, settings):
    from django.core.management import call_command

    tenant = provision("acme", simulator.url)
    home = tmp_path / "codex-home"
    settings.SWITCHYARD_PUBLIC_URL = f"http://127.0.0.1:{api_server.port}"
    call_command("codex_config", "--org", "acme", "--key-name", "acme key", "--out", str(home))
    config = home / "config.toml"
    config.write_text(TOP_LEVEL + config.read_text() + APPENDED)
    run = codex_runner(codex_bin, home, tmp_path, tenant.key)
    run.tenant = tenant  # type: ignore[attr-defined]
    return run


def codex_runner(binary: Path, home: Path, tmp_path: Path, key: str) -> Callable:
    """``run(prompt)``: ``codex exec`` of the kit's profile in a fresh work
    directory, with ``home`` as its configuration and nothing else of the
    machine's environment."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CODEX_HOME": str(home),
        "SWITCHYARD_API_KEY": key,
        "NO_COLOR": "1",
    }

    def run(prompt: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(binary), "--profile", "switchyard", "exec", "--skip-git-repo-check", prompt],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )

    run.workdir = workdir  # type: ignore[attr-defined]
    return run


def test_codex_runs_a_shell_command_and_answers_with_its_output(codex):
    marker = f"switchyard-{uuid.uuid4().hex[:8]}"
    result = codex(f"Print a marker. [[exec:echo {marker}]]")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Tool result:" in result.stdout and marker in result.stdout, result.stdout
    # Two turns: the call, then the answer after the command's output.
    rows = wait_rows(2, organisation=codex.tenant.organisation)
    assert all(row.status == 200 and row.stream for row in rows)


def test_codex_edits_a_file_through_apply_patch(codex):
    target = codex.workdir / "notes.txt"
    target.write_text("first line\nold line\nlast line\n")
    result = codex("Fix the notes. [[edit:notes.txt old line=>new line]]")
    assert result.returncode == 0, result.stderr[-3000:]
    assert target.read_text() == "first line\nnew line\nlast line\n"
    assert "Tool result:" in result.stdout and "notes.txt" in result.stdout, result.stdout


def test_codex_stops_at_a_spent_quota_without_retrying(codex, api_server):
    from openai import OpenAI

    from accounts.models import ApiKey
    from accounts.services.api_keys import api_key_update

    key = ApiKey.objects.get(organisation=codex.tenant.organisation, name="acme key")
    api_key_update(api_key=key, actor=_cli(), data={"monthly_tokens": 10})
    client = OpenAI(base_url=api_server.url + "/v1", api_key=codex.tenant.key, max_retries=0)
    client.responses.create(model="sim-model", input="[[tokens:20]] spend the quota")
    wait_rows(1, organisation=codex.tenant.organisation)
    result = codex("Say hi. [[text:hi]]")
    assert result.returncode != 0
    shown = result.stdout + result.stderr
    assert "Quota exceeded" in shown, shown[-3000:]
    # Rows are written in the order their requests end: once the row of a
    # request sent after Codex exited is there, so is any retry's.
    client.models.list()
    rows = wait_for(
        lambda: (
            (rows := usage_rows(organisation=codex.tenant.organisation))
            and rows[-1].endpoint == "/models"
            and rows
        )
    )
    # Codex may prewarm its socket first (generate: false): a row that
    # reached no backend and spent nothing, and at most one.
    prewarms = [row for row in rows if row.method == "WS" and row.status == 200]
    assert len(prewarms) <= 1, [(r.method, r.status) for r in rows]
    assert all(r.backend_id is None and r.input_tokens == r.output_tokens == 0 for r in prewarms)
    # The request that spent the quota, Codex's one refused response.create
    # (its code `insufficient_quota` read as a quota error, not retried),
    # then the request above.
    others = [row for row in rows if row not in prewarms]
    assert [(r.method, r.endpoint, r.status) for r in others] == [
        ("POST", "/responses", 200),
        ("WS", "/responses", 429),
        ("GET", "/models", 200),
    ]
    assert others[1].error_code == "insufficient_quota"


def _cli():
    from accounts.audit import CLI

    return CLI


def test_codex_s_web_search_runs_on_the_bound_provider(codex, search_api):  # noqa: F811
    """Codex offers ``{"type": "web_search"}`` by default: dropped with a
    notice where nothing is bound, run where a provider is."""
    from accounts.audit import CLI
    from responses_api.catalogue.services.web_search import web_search_bind

    web_search_bind(
        organisation=codex.tenant.organisation,
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )
    marker = f"searched-{uuid.uuid4().hex[:8]}"
    result = codex(
        'Look it up. [[call:web_search {"query": "eiffel tower"}]] '
        f"[[answer:{marker}: it opened in 1889 [1].]]"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert marker in result.stdout, result.stdout[-3000:]
    # The gateway ran the search: the model answered after reading its results.
    searched = wait_for(
        lambda: [r for r in usage_rows(organisation=codex.tenant.organisation) if r.tool_calls]
    )
    assert [(row.tool_calls, row.tool_errors) for row in searched] == [(1, 0)]
