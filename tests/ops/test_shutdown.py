"""SIGTERM to a daphne process with live streams (SPEC: rolling updates cut no stream).

The process turns not-ready at once, refuses new requests with 503, lets the
streams that finish within SWITCHYARD_SHUTDOWN_GRACE_SECONDS complete, ends the
others with ``response.failed``, writes every usage row and exits.
"""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest

from tests.conftest import server_env, start_daphne, wait_for, wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

GRACE = 6.0


class Stream(threading.Thread):
    """One streamed request read event by event in the background."""

    def __init__(self, url: str, key: str, prompt: str) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.prompt = url, key, prompt
        self.events: list[dict] = []
        self.request_id = ""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.stream(
                "POST",
                self.url + "/v1/responses",
                headers={"authorization": f"Bearer {self.key}"},
                json={"model": "sim-model", "input": self.prompt, "stream": True},
                timeout=60,
            ) as response:
                self.request_id = response.headers["x-request-id"]
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
        except BaseException as exc:
            self.error = exc

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def has_deltas(self) -> bool:
        return "response.output_text.delta" in self.types


def test_sigterm_drains_streams_then_ends_the_rest_with_response_failed(provision, simulator):
    acme = provision("acme", simulator.url)
    server = start_daphne(server_env(SWITCHYARD_SHUTDOWN_GRACE_SECONDS=str(GRACE)))
    try:
        # Two streams that finish within the grace period (~1.6 s), two that cannot (~40 s).
        short = [Stream(server.url, acme.key, "[[rate:5]] [[tokens:8]] short") for _ in range(2)]
        long = [Stream(server.url, acme.key, "[[rate:5]] [[tokens:200]] long") for _ in range(2)]
        for stream in short + long:
            stream.start()
        wait_for(lambda: all(s.has_deltas() for s in short + long), timeout=20)

        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)

        ready = wait_for(
            lambda: (r := httpx.get(server.url + "/readyz", timeout=5)).status_code == 503 and r,
            timeout=5,
        )
        assert ready.json()["status"] == "draining"
        assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200

        refused = httpx.post(
            server.url + "/v1/responses",
            headers={"authorization": f"Bearer {acme.key}"},
            json={"model": "sim-model", "input": "too late"},
            timeout=10,
        )
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "server_shutting_down"
        assert refused.headers["retry-after"] == "1"

        for stream in short + long:
            stream.join(timeout=GRACE + 20)
            assert not stream.is_alive()
            assert stream.error is None, stream.error
        for stream in short:
            assert stream.types[-1] == "response.completed"
        for stream in long:
            assert stream.types[-1] == "response.failed"
            failed = stream.events[-1]["response"]
            assert failed["error"]["code"] == "server_error"
            assert "shutting down" in failed["error"]["message"]

        server.process.wait(timeout=GRACE + 20)
        elapsed = time.monotonic() - sent
        assert elapsed >= GRACE - 0.5  # the long streams were given the grace period
        assert server.process.returncode == 0, server.output()

        rows = {str(r.request_id): r for r in wait_rows(4, organisation=acme.organisation)}
        assert len(rows) == 4  # the refused request was never admitted: no row
        for stream in short:
            row = rows[stream.request_id]
            assert (row.status, row.output_tokens) == (200, 8)
        for stream in long:
            row = rows[stream.request_id]
            assert row.status == 503 and row.error_code == "server_shutting_down"
            assert 0 < row.output_tokens < 200
            assert row.note == "Server shut down"
    finally:
        server.stop()


def test_an_idle_process_exits_promptly_on_sigterm():
    server = start_daphne(server_env(SWITCHYARD_SHUTDOWN_GRACE_SECONDS="30"))
    try:
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=15)
        assert time.monotonic() - started < 10
        assert server.process.returncode == 0
    finally:
        server.stop()
