"""``make run`` as a newcomer meets it: ``manage.py run_embedded`` on a fresh
database, the banner's instructions followed as printed, and the ways it
refuses to start or stops."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from openai import OpenAI

from tests.conftest import ROOT, free_port
from tests.support import wait_until

pytestmark = pytest.mark.live


def _env(tmp_path: Path) -> dict[str, str]:
    """The embedded default on a database of its own: no Redis, SQLite."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'first-run.sqlite3'}"
    return env


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    """A freshly migrated database, as ``make run`` has it before the command."""
    directory = tmp_path_factory.mktemp("migrated")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=_env(directory),
        check=True,
        capture_output=True,
    )
    return directory / "first-run.sqlite3"


@pytest.fixture
def fresh(tmp_path, migrated) -> Path:
    shutil.copy(migrated, tmp_path / "first-run.sqlite3")
    return tmp_path


def _run_embedded(tmp_path: Path, port: int, simulator_port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "run_embedded",
            "--port",
            str(port),
            "--simulator-port",
            str(simulator_port),
            "--state",
            str(tmp_path / "demo.json"),
        ],
        cwd=ROOT,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _banner(process: subprocess.Popen) -> str:
    """What the command printed up to the banner's last line."""
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("Stop with Ctrl-C."):
            return "".join(lines)
    raise AssertionError("no banner:\n" + "".join(lines))


def _value(banner: str, label: str) -> str:
    match = re.search(rf"^\s+{label}\s+(\S+)", banner, re.M)
    assert match, banner
    return match.group(1)


def test_a_taken_port_stops_it_before_the_banner_with_a_non_zero_status(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _run_embedded(tmp_path, port, free_port())
        output, _ = process.communicate(timeout=60)
    assert process.returncode != 0
    assert f"Port {port} on 127.0.0.1 is in use: choose another with make run PORT=" in output
    assert "Switchyard is running" not in output
    assert not (tmp_path / "demo.json").exists()


@pytest.mark.timeout(180)
def test_the_banner_s_instructions_work_as_printed(fresh):
    tmp_path = fresh
    port, simulator_port = free_port(), free_port()
    process = _run_embedded(tmp_path, port, simulator_port)
    try:
        banner = _banner(process)
        base = f"http://127.0.0.1:{port}"
        key, model = _value(banner, "API key"), _value(banner, "Model")
        assert "previous_response_id" in banner

        # The banner is printed once both servers answer: no waiting here.
        client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
        first = client.responses.create(model=model, input="[[text:Paris is the capital.]]")
        assert first.output_text == "Paris is the capital."
        second = client.responses.create(
            model=model, input="And of Italy?", previous_response_id=first.id
        )
        assert second.previous_response_id == first.id

        # The Codex lines, run as printed (with ~/.codex moved into tmp_path).
        command = next(line for line in banner.splitlines() if "codex_config" in line)
        argv = shlex.split(command.replace("~/.codex", str(tmp_path / "codex")))
        subprocess.run(argv, cwd=ROOT, env=_env(tmp_path), check=True, capture_output=True)
        written = sorted(path.name for path in (tmp_path / "codex").iterdir())
        assert written == ["config.toml", "model_catalog.json", "switchyard.config.toml"]
        assert f'base_url = "{base}/v1"' in (tmp_path / "codex" / "config.toml").read_text()
        assert f"export SWITCHYARD_API_KEY={key}" in banner
        assert "codex --profile switchyard" in banner
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert process.returncode == 0


@pytest.mark.timeout(180)
def test_a_child_that_dies_stops_it_with_a_non_zero_status(fresh):
    tmp_path = fresh
    simulator_port = free_port()
    process = _run_embedded(tmp_path, free_port(), simulator_port)
    try:
        _banner(process)
        simulator = _child_with(f"--port {simulator_port}", parent=process.pid)
        os.kill(simulator, signal.SIGKILL)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0
    assert "the simulator stopped" in output


def _child_with(text: str, parent: int) -> int:
    """The pid of ``parent``'s child whose command line holds ``text``."""

    def found() -> int | None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                status = (entry / "status").read_text()
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if f"PPid:\t{parent}\n" in status and text in command:
                return int(entry.name)
        return None

    return wait_until(found, timeout=20, message=f"no child of {parent} runs {text!r}")
