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

# Applies SPEC (argv[1]) after running argv[2], then prints what the
# patched attributes are and the warnings logged.
PROBE = """
import json, logging, sys

records = []
handler = logging.Handler()
handler.emit = records.append
logging.getLogger("switchyard.server").addHandler(handler)
logging.getLogger("switchyard.server").setLevel(logging.INFO)

from daphne import http_protocol, server, ws_protocol
from twisted.internet import tcp
from twisted.python.deprecate import _ModuleProxy
from twisted.web import http

stock_request = http_protocol.WebRequest  # before the patches
stock_socket = ws_protocol.WebSocketFactory.protocol

from config import patches

exec(sys.argv[2])
applied = patches.apply(sys.argv[1])
factory = server.HTTPFactory(None)
protocol = factory.buildProtocol(None)
request = protocol.requestFactory
print(json.dumps({
    "applied": applied,
    "active": {
        "backpressure": issubclass(request, stock_request)
        and hasattr(request, "pauseProducing")
        and server.Server.handle_reply.__module__ == "config.patches_bounds",
        "daphne_factory": request is not http_protocol.WebRequest
        and issubclass(request, http_protocol.WebRequest)
        and type(factory).log is not http_protocol.HTTPFactory.log,
        "eager_writes": tcp.Port.transport.__name__ == "EagerServer"
        and issubclass(tcp.Port.transport, tcp.Server),
        "header_timeout": type(protocol._channel) is not http.HTTPChannel
        and isinstance(protocol._channel, http.HTTPChannel),
        "http_module": not isinstance(http_protocol.http, _ModuleProxy),
        "websocket_writes": ws_protocol.WebSocketFactory.protocol is not stock_socket
        and issubclass(ws_protocol.WebSocketFactory.protocol, stock_socket)
        and hasattr(ws_protocol.WebSocketFactory.protocol, "pauseProducing"),
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
    assert name in all_patches["applied"]
    assert all_patches["active"][name] is True
    assert all_patches["warnings"] == []


def test_none_leaves_daphne_and_twisted_as_they_are():
    result = _probe("none")
    assert result["applied"] == []
    assert not any(result["active"].values())
    assert result["warnings"] == []


@pytest.mark.parametrize("name", patches.NAMES)
def test_a_patch_can_be_switched_off_alone(name):
    result = _probe(f"-{name}")
    assert result["applied"] == [n for n in patches.NAMES if n != name]
    assert result["active"] == {n: n != name for n in patches.NAMES}
    assert result["warnings"] == []


def test_a_missing_internal_keeps_the_stock_behaviour_with_one_warning():
    """Twisted's ports no longer make their transports from tcp.Server: that
    patch is left out, with one warning that says why; the other applies."""
    result = _probe("all", "tcp.Port.transport = type('Other', (tcp.Server,), {})")
    assert result["applied"] == [n for n in patches.NAMES if n != "eager_writes"]
    assert result["active"] == {n: n != "eager_writes" for n in patches.NAMES}
    assert result["warnings"] == [
        "Server patches not applied, stock behaviour kept: "
        "eager_writes (twisted.internet.tcp.Port.transport is not tcp.Server)"
    ]


def test_websocket_writes_on_another_autobahn_write_keeps_autobahns_path():
    """autobahn's ``sendData`` no longer queues, counts and logs as the
    joined path does in its place: daphne's sockets keep autobahn's own
    writes (no joined frames, no producer), with one warning that says why."""
    result = _probe(
        "all",
        "def sendData(self, data, sync=False, chopsize=None):\n"
        "    self.transport.write(data)\n"
        "ws_protocol.WebSocketProtocol.sendData = sendData",
    )
    assert result["applied"] == [n for n in patches.NAMES if n != "websocket_writes"]
    assert result["active"] == {n: n != "websocket_writes" for n in patches.NAMES}
    assert result["warnings"] == [
        "Server patches not applied, stock behaviour kept: websocket_writes "
        "(sendData no longer uses send_queue; sendData no longer uses trafficStats; "
        "sendData no longer uses logOctets)"
    ]


def test_another_version_keeps_the_stock_behaviour_with_one_warning():
    result = _probe(
        "all", "from config import patch_support; patch_support.version = lambda d: '99.0'"
    )
    assert result["applied"] == []
    assert not any(result["active"].values())
    [warning] = result["warnings"]
    assert f"daphne_factory (Twisted is 99.0, not {patches.TWISTED}; daphne is 99.0" in warning
    assert f"eager_writes (Twisted is 99.0, not {patches.TWISTED})" in warning
    assert "http_module (Twisted is 99.0" in warning


def test_the_versions_written_for_are_the_pinned_ones():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"Twisted=={patches.TWISTED}" in dependencies
    assert f"daphne=={patches.DAPHNE}" in dependencies


@pytest.mark.parametrize(
    "spec, names",
    [
        (None, list(patches.NAMES)),
        ("all", list(patches.NAMES)),
        ("none", []),
        ("eager_writes", ["eager_writes"]),
        (
            "-eager_writes",
            ["backpressure", "daphne_factory", "header_timeout", "http_module", "websocket_writes"],
        ),
        (" eager_writes , daphne_factory ", ["daphne_factory", "eager_writes"]),
    ],
)
def test_the_environment_variable_selects_patches(spec, names):
    assert patches.selected(spec) == names


@pytest.mark.parametrize("spec", ["eager", "eager_writes,-daphne_factory"])
def test_an_unknown_or_mixed_selection_is_an_error(spec):
    with pytest.raises(ValueError, match="SWITCHYARD_SERVER_PATCHES"):
        patches.selected(spec)


@pytest.mark.parametrize(
    "status, phrase",
    [
        (413, b"Request Entity Too Large"),
        (415, b"Unsupported Media Type"),
        (422, b"Unprocessable Entity"),
        (429, b"Too Many Requests"),
        (499, b"Client Closed Request"),
        (504, b"Gateway Timeout"),
    ],
)
def test_every_status_the_api_sends_has_a_reason_phrase(status, phrase):
    """Twisted's own table lacks 429 and 499 ("Unknown Status")."""
    assert patches._PHRASES[status] == phrase
