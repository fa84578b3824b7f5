"""SIGTERM to a daphne process holding WebSockets (docs/api/websocket.md):
an idle socket gets ``server_shutting_down`` and a clean close at once; a
socket whose response is under way gets that response whole (it finishes
within the grace period), then the same error and the close; every turn
leaves its row."""

from __future__ import annotations

import json
import signal
import socket

import pytest
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK
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


def test_a_client_that_stops_reading_is_dropped(provision, simulator):
    """Once its frames fill the process's buffer, the response waits for the
    client as an HTTP stream would; a client that takes none of them for
    SWITCHYARD_CLIENT_STALL_SECONDS is dropped and the response ends as a
    499, rather than be held whole in memory."""
    acme = provision("acme", simulator.url)
    server = start_daphne(server_env(SWITCHYARD_CLIENT_STALL_SECONDS="2"))
    try:
        raw = socket.create_connection(("127.0.0.1", server.port))
        # A small receive window: the kernel holds little of what is sent.
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        url = server.url.replace("http://", "ws://") + "/v1/responses"
        with connect(
            url,
            sock=raw,
            additional_headers={"Authorization": f"Bearer {acme.key}"},
            max_queue=1,
            compression=None,  # uncompressed, 60,000 tokens are 8 MB of frames
        ) as client:
            client.send(
                json.dumps(
                    {"type": "response.create", "model": "sim-model", "input": "[[tokens:60000]]"}
                )
            )
            # The client reads nothing more (its one-frame queue stays full).
            (row,) = wait_rows(1, timeout=60, organisation=acme.organisation)
            assert row.status == 499 and row.method == "WS"
            assert row.output_tokens < 60000
            types = []
            with pytest.raises(ConnectionClosedError):
                while True:
                    types.append(json.loads(client.recv(timeout=30))["type"])
        assert "response.completed" not in types
    finally:
        server.stop()
