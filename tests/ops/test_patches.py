"""config/patches.py: each patch is active on the pinned Twisted and daphne,
and one whose internals are not there leaves the stock behaviour, with one
warning.

Each case runs in its own interpreter: the patches replace attributes of
Twisted's and daphne's modules, and importing ``daphne.server`` installs a
Twisted reactor.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from config import patches

ROOT = Path(__file__).resolve().parents[2]

# Prints what the patched attributes are after ``patches.apply(SPEC)``.
PROBE = """
import json, logging, sys

records = []
handler = logging.Handler()
handler.emit = records.append
logging.getLogger("switchyard.server").addHandler(handler)
logging.getLogger("switchyard.server").setLevel(logging.INFO)

from daphne import http_protocol, server
from twisted.internet import tcp
from twisted.python.deprecate import _ModuleProxy

from config import patches

exec(sys.argv[2])  # what the case breaks first
active = patches.apply(sys.argv[1])
request = server.HTTPFactory(None).buildProtocol(None).requestFactory
mixins = {c.__name__ for c in request.__mro__}
print(json.dumps({
    "active": active,
    "state": {
        "eager_writes": hasattr(tcp.Port.transport, "hold"),
        "http_module": not isinstance(http_protocol.http, _ModuleProxy),
        "daphne_factory": "_NoFormParsing" in mixins,
        "first_bytes_together": "_FirstBytesTogether" in mixins,
        "chunk_fast_path": "ChunkFastPath" in mixins,
    },
    "warnings": [r.getMessage() for r in records if r.levelno == logging.WARNING],
}))
"""


def _probe(spec: str, breaking: str = "") -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, spec, breaking],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def all_patches() -> dict:
    return _probe("all")


@pytest.mark.parametrize("name", patches.NAMES)
def test_each_patch_is_active_on_the_pinned_versions(all_patches, name):
    assert name in all_patches["active"]
    assert all_patches["state"][name] is True
    assert all_patches["warnings"] == []


def test_none_leaves_daphne_and_twisted_as_they_are():
    result = _probe("none")
    assert result["active"] == []
    assert not any(result["state"].values())
    assert result["warnings"] == []


def test_a_patch_can_be_switched_off_alone():
    result = _probe("-chunk_fast_path")
    assert result["active"] == [n for n in patches.NAMES if n != "chunk_fast_path"]
    assert result["state"] == {n: n != "chunk_fast_path" for n in patches.NAMES}


def test_switching_off_a_patch_switches_off_those_that_need_it_without_a_warning():
    result = _probe("-eager_writes")
    assert "first_bytes_together" not in result["active"]
    assert result["state"]["eager_writes"] is False
    assert result["warnings"] == []


def test_a_missing_internal_keeps_the_stock_behaviour_with_one_warning():
    """Twisted's ports no longer make their transports from tcp.Server: the
    patch that relies on it, and the one that needs it, are left out; one
    warning names both; the others still apply."""
    result = _probe("all", "tcp.Port.transport = type('Other', (tcp.Server,), {})")
    assert result["active"] == ["http_module", "daphne_factory", "chunk_fast_path"]
    assert result["state"]["eager_writes"] is False
    assert result["state"]["first_bytes_together"] is False
    [warning] = result["warnings"]
    assert "eager_writes (twisted.internet.tcp.Port.transport is not tcp.Server)" in warning
    assert "first_bytes_together (needs eager_writes)" in warning


def test_another_version_keeps_the_stock_behaviour_with_one_warning():
    result = _probe("all", "patches.version = lambda dist: '99.0'")
    assert result["active"] == []
    assert not any(result["state"].values())
    [warning] = result["warnings"]
    assert f"Twisted is 99.0, not {patches.TWISTED}" in warning
    assert all(name in warning for name in patches.NAMES)


def test_the_versions_written_for_are_the_pinned_ones():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"Twisted=={patches.TWISTED}" in dependencies
    assert f"daphne=={patches.DAPHNE}" in dependencies


def test_an_unknown_patch_name_is_an_error():
    with pytest.raises(ValueError, match="unknown patch eager"):
        patches.selected("eager")
