"""Every request's life has one owner: ``pipeline/runner.py``.

HTTP requests, WebSocket turns and background runs each reach their
handler through ``runner.run``; none of the transports runs the ending,
tracks draining, ends a trace or salvages a failure itself, and every
event is numbered by ``pipeline/writers.py`` alone. Read from the source,
so that a fourth copy of the outer steps cannot creep back in unseen."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PRODUCT = ROOT / "responses_api"
RUNNER = "responses_api/pipeline/runner.py"
TRANSPORTS = (
    "responses_api/edge/http.py",
    "responses_api/edge/websocket.py",
    "responses_api/background/run.py",
)


def _calls(path: Path) -> set[str]:
    """The names called in ``path``: ``f(...)`` and ``x.f(...)`` both as ``f``."""
    called = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                called.add(func.id)
            elif isinstance(func, ast.Attribute):
                called.add(func.attr)
    return called


def _callers(name: str) -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for path in PRODUCT.rglob("*.py")
        if "migrations" not in path.parts and name in _calls(path)
    }


def test_each_transport_runs_its_requests_through_the_runner():
    for transport in TRANSPORTS:
        assert {"run", "run_request"} & _calls(ROOT / transport), transport


def test_only_the_runner_runs_the_ending_tracks_draining_and_ends_traces():
    assert _callers("end_served") == {RUNNER}
    assert _callers("track") == {RUNNER}
    assert _callers("trace_finish") == {RUNNER}


def test_one_salvage_and_one_place_that_numbers_events():
    defined = [
        path.relative_to(ROOT).as_posix()
        for path in PRODUCT.rglob("*.py")
        if "def salvage(" in path.read_text() or "def _salvage(" in path.read_text()
    ]
    assert defined == [RUNNER]
    numbering = [
        path.relative_to(ROOT).as_posix()
        for path in PRODUCT.rglob("*.py")
        if '["sequence_number"] =' in path.read_text()
    ]
    assert numbering == ["responses_api/pipeline/writers.py"]
