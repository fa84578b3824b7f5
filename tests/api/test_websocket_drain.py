"""SIGTERM to a daphne process holding WebSockets (README, "WebSocket mode"):
an idle socket gets ``server_shutting_down`` and a clean close at once; a
socket whose response is under way gets that response whole (it finishes
within the grace period), then the same error and the close; every turn
leaves its row."""

from __future__ import annotations

import json
import signal

import pytest
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect

from tests.conftest import server_env, start_daphne, wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def test_sigterm_closes_sockets_once_their_response_has_ended(provision, simulator):
    acme = provision("acme", simulator.url)
    server = start_daphne(server_env(SWITCHYARD_SHUTDOWN_GRACE_SECONDS="20"))
    url = server.url.replace("http://", "ws://") + "/v1/responses"
    headers = {"Authorization": f"Bearer {acme.key}"}
    try:
        with (
            connect(url, additional_headers=headers) as idle,
            connect(url, additional_headers=headers) as busy,
        ):
            busy.send(
                json.dumps(
                    {
                        "type": "response.create",
                        "model": "sim-model",
                        "input": "[[tokens:12]] [[rate:6]]",
                    }
                )
            )
            events = [json.loads(busy.recv(timeout=30))]
            while events[-1]["type"] != "response.output_text.delta":
                events.append(json.loads(busy.recv(timeout=30)))
            server.process.send_signal(signal.SIGTERM)

            shut = json.loads(idle.recv(timeout=10))
            with pytest.raises(ConnectionClosedOK) as closed:
                idle.recv(timeout=10)
            assert shut["type"] == "error" and shut["status"] == 503
            assert shut["error"]["code"] == "server_shutting_down"
            assert closed.value.rcvd.code == 1000

            while events[-1]["type"] != "response.completed":
                events.append(json.loads(busy.recv(timeout=30)))
            deltas = [e for e in events if e["type"] == "response.output_text.delta"]
            assert len(deltas) == 12
            after = json.loads(busy.recv(timeout=10))
            assert after["error"]["code"] == "server_shutting_down"
            with pytest.raises(ConnectionClosedOK):
                busy.recv(timeout=10)
        assert server.process.wait(timeout=30) == 0
        (row,) = wait_rows(1, organisation=acme.organisation)
        assert row.status == 200 and row.method == "WS" and row.output_tokens == 12
    finally:
        server.stop()
