"""A protection patch that does not fit the installed versions stops a
production start (``python -m config.serve``), with a message naming the
patch and both ways out; dropped explicitly, the process starts. Outside
production the stock behaviour is kept with a warning, as before.

The version daphne reports is changed in the server's own interpreter,
before anything reads it: what a bump of daphne looks like to the checks.
"""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from config import patches
from tests.conftest import ROOT, free_port, server_env, wait_http
from tests.ops.test_settings import production_env

# ``python -m config.serve ARGS`` on an installed daphne that says it is 4.3.0.
BUMPED = """
import runpy, sys
from importlib import metadata

stock = metadata.version
metadata.version = lambda dist: "4.3.0" if dist == "daphne" else stock(dist)
sys.argv = ["config.serve", *sys.argv[1:]]
runpy.run_module("config.serve", run_name="__main__", alter_sys=True)
"""

PROTECTING = ["backpressure", "daphne_factory", "header_timeout", "websocket_writes"]
DROPPED = "-backpressure,-daphne_factory,-header_timeout,-websocket_writes"


def start(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", BUMPED, "-b", "127.0.0.1", "-p", str(port)]
        + ["config.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


def serves(process: subprocess.Popen, url: str) -> str:
    """The process's output once it has answered over HTTP and been stopped."""
    try:
        wait_http(url + "/healthz", proc=process)
        assert httpx.get(url + "/healthz", headers={"Host": "localhost"}).status_code < 500
    finally:
        process.terminate()
        out, err = process.communicate(timeout=20)
    return out + err


def test_production_refuses_to_start_when_a_protection_patch_does_not_fit():
    process, _url = start(production_env())
    try:
        _out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    assert process.returncode != 0
    assert "Refusing to start" in err
    for name in PROTECTING:
        assert f"  {name} (" in err
    assert "daphne is 4.3.0, not 4.2.3" in err
    # Both ways out: the versions written for, and the exact value that drops them.
    assert f"daphne=={patches.DAPHNE}" in err and f"Twisted=={patches.TWISTED}" in err
    assert f"autobahn=={patches.AUTOBAHN}" in err
    assert f"\n  SWITCHYARD_SERVER_PATCHES={DROPPED}" in err
    # Only the patches that protect: the others only save work.
    assert "  http_module (" not in err and "Traceback" not in err


def test_production_starts_when_the_patches_are_dropped_explicitly():
    process, url = start(production_env(SWITCHYARD_SERVER_PATCHES=DROPPED))
    output = serves(process, url)
    # What is left and does not fit only warns, as outside production.
    assert "Server patches not applied, stock behaviour kept: http_module" in output
    assert "Refusing to start" not in output


def test_outside_production_a_patch_that_does_not_fit_warns_and_serves(django_db_setup):
    process, url = start(server_env())
    output = serves(process, url)
    assert "Server patches not applied, stock behaviour kept: backpressure" in output
    assert "Refusing to start" not in output


# Applies every patch in production after running argv[1]; prints the
# outcome (a refusal's message, or the patches applied).
PROBE = """
import json, sys

from daphne import ws_protocol
from twisted.internet import tcp

from config import patches

exec(sys.argv[1])
try:
    print(json.dumps({"applied": patches.apply(sys.argv[2], production=True)}))
except patches.Refused as refused:
    print(json.dumps({"refused": str(refused)}))
"""

BROKEN_WEBSOCKET = (
    "def sendData(self, data, sync=False, chopsize=None):\n"
    "    self.transport.write(data)\n"
    "ws_protocol.WebSocketProtocol.sendData = sendData"
)


def probe(breaking: str, spec: str = "all") -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, breaking, spec],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_a_missing_internal_of_a_protection_patch_is_refused_in_production():
    refused = probe(BROKEN_WEBSOCKET)["refused"]
    assert "  websocket_writes (" in refused and "sendData no longer uses send_queue" in refused
    assert f"autobahn=={patches.AUTOBAHN}" in refused
    assert refused.endswith("\n  SWITCHYARD_SERVER_PATCHES=-websocket_writes")
    for name in patches.NAMES:
        if name != "websocket_writes":
            assert f"  {name} (" not in refused


def test_the_value_given_drops_only_that_patch():
    result = probe(BROKEN_WEBSOCKET, "-websocket_writes")
    assert result["applied"] == [n for n in patches.NAMES if n != "websocket_writes"]


def test_a_list_of_names_is_answered_with_a_list_of_names():
    refused = probe(BROKEN_WEBSOCKET, "websocket_writes,eager_writes")["refused"]
    assert refused.endswith("\n  SWITCHYARD_SERVER_PATCHES=eager_writes")


def test_a_patch_that_only_saves_work_is_left_out_with_a_warning_in_production():
    result = probe("tcp.Port.transport = type('Other', (tcp.Server,), {})")
    assert result["applied"] == [n for n in patches.NAMES if n != "eager_writes"]


@pytest.mark.parametrize(
    "spec, value",
    [
        (None, DROPPED),
        ("all", DROPPED),
        ("-eager_writes", DROPPED.replace(",-header", ",-eager_writes,-header")),
        ("header_timeout,http_module", "http_module"),
        ("header_timeout", "none"),
    ],
)
def test_the_value_that_drops_patches_keeps_the_rest_of_the_selection(spec, value):
    assert patches.without(spec, PROTECTING) == value
    assert patches.selected(value) == [n for n in patches.selected(spec) if n not in PROTECTING]
