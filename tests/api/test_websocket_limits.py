"""The bounds of WebSocket mode (docs/api/websocket.md and
docs/operations/limits.md): a
frame over the size cap, and the sockets one key and one organisation may
hold open. A live daphne serves them, the ``websockets`` client connects;
its ``/healthz`` answers while each is refused, and after."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from tests.api.test_websocket import frames_until_done, ws_url
from tests.conftest import server_env, start_daphne, usage_rows, wait_for, wait_rows
from tests.support import healthz_watch

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

CAP = 64 * 1024
SLOW = {"type": "response.create", "model": "sim-model", "input": "[[tokens:60]] [[rate:10]]"}
PREWARM = json.dumps(
    {"type": "response.create", "model": "sim-model", "input": "warm", "generate": False}
)


@pytest.fixture(scope="module", params=["all", "none"])
def small_frames(request, django_db_setup, django_db_blocker):
    """A server whose frames may hold 64 KiB, with its server patches and with none."""
    server = start_daphne(
        server_env(SWITCHYARD_MAX_BODY_BYTES=str(CAP), SWITCHYARD_SERVER_PATCHES=request.param)
    )
    yield server
    server.stop()


@pytest.fixture
def acme(provision, simulator):
    return provision("acme", simulator.url)


def connect(server, key: str, **options):
    return ws_connect(
        ws_url(server), additional_headers={"Authorization": f"Bearer {key}"}, **options
    )


def refusal(socket) -> tuple[dict, int]:
    """The error frame a socket gets before its close, and the close's code."""
    error = json.loads(socket.recv(timeout=30))
    with pytest.raises(ConnectionClosed) as closed:
        socket.recv(timeout=30)
    assert closed.value.rcvd is not None, "closed without a close frame"
    return error, closed.value.rcvd.code


def opened(server, key: str):
    """A socket the server has taken (its place held): a prewarm answered on it."""
    socket = connect(server, key)
    socket.send(PREWARM)
    assert frames_until_done(socket)[-1]["type"] == "response.completed"
    return socket


@pytest.mark.parametrize("compression", [None, "deflate"])
def test_a_frame_over_the_cap_gets_its_error_frame_and_the_close(small_frames, acme, compression):
    # Uncompressed, the client is still sending it when the server refuses
    # it; compressed, it is a few KiB on the wire: the cap is on its decoded size.
    frame = json.dumps({"type": "response.create", "model": "sim-model", "input": "a" * 32 * CAP})
    with (
        healthz_watch(small_frames.url, interval=0.01),  # refused within a tenth of a second
        connect(small_frames, acme.key, compression=compression) as socket,
    ):
        socket.send(PREWARM)
        assert frames_until_done(socket)[-1]["type"] == "response.completed"
        socket.send(frame)
        error, code = refusal(socket)
    assert error["type"] == "error" and error["status"] == 413, error
    assert error["error"]["code"] == "request_too_large"
    assert str(CAP) in error["error"]["message"]
    assert "SWITCHYARD_MAX_BODY_BYTES" in error["error"]["message"]
    assert error["headers"]["x-request-id"]
    assert code == 4413
    rows = wait_rows(2, organisation=acme.organisation)
    assert sorted((r.status, r.error_code) for r in rows) == [(200, ""), (413, "request_too_large")]


def test_a_frame_under_the_cap_is_answered(small_frames, acme):
    frame = {"type": "response.create", "model": "sim-model", "input": "a" * (CAP - 200)}
    with connect(small_frames, acme.key, compression="deflate") as socket:
        socket.send(json.dumps(frame))
        # The simulator answers; no refusal of the frame's size.
        assert frames_until_done(socket)[-1]["type"] == "response.completed"
        socket.send(PREWARM)
        assert frames_until_done(socket)[-1]["type"] == "response.completed"
    assert all(r.status != 413 for r in wait_rows(2, organisation=acme.organisation))


def test_too_many_frames_leave_a_429_row_and_cut_the_response_under_way(api_server, acme):
    slow = SLOW
    with healthz_watch(api_server.url, interval=0.01), connect(api_server, acme.key) as socket:
        socket.send(json.dumps(slow))
        assert json.loads(socket.recv(timeout=30))["type"] == "response.created"
        for _ in range(17):  # 16 may wait behind the response under way
            socket.send(json.dumps(slow))
        events = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                events.append(json.loads(socket.recv(timeout=30)))
    error = events[-1]
    assert error["type"] == "error" and error["error"]["code"] == "too_many_frames"
    assert error["headers"]["x-request-id"]
    assert closed.value.rcvd.code == 4429
    rows = wait_rows(2, organisation=acme.organisation)
    time.sleep(0.5)
    rows = usage_rows(organisation=acme.organisation)
    # One row for the refused frame, one for the response it cut: the server
    # closed the socket, so neither is a client gone (499).
    assert [(r.status, r.error_code) for r in rows] == [(429, "too_many_frames")] * 2
    assert error["headers"]["x-request-id"] in {str(r.request_id) for r in rows}


@pytest.fixture
def few_sockets(django_db_setup, django_db_blocker):
    server = start_daphne(
        server_env(SWITCHYARD_WEBSOCKETS_PER_KEY="2", SWITCHYARD_WEBSOCKETS_PER_ORGANISATION="3")
    )
    yield server
    server.stop()


def test_sockets_are_bounded_per_key_and_organisation_and_freed_on_close(
    few_sockets, provision, simulator
):
    first = provision("acme", simulator.url)
    second = provision("acme", simulator.url)
    other = provision("globex", simulator.url)
    with healthz_watch(few_sockets.url):
        a1, a2 = opened(few_sockets, first.key), opened(few_sockets, first.key)
        with connect(few_sockets, first.key) as socket:
            error, code = refusal(socket)
        assert error["status"] == 429 and error["error"]["code"] == "websocket_limit_reached"
        assert "SWITCHYARD_WEBSOCKETS_PER_KEY" in error["error"]["message"]
        assert "2" in error["error"]["message"] and error["headers"]["x-request-id"]
        assert code == 4429
        b1 = opened(few_sockets, second.key)
        with connect(few_sockets, second.key) as socket:
            error, code = refusal(socket)
        assert error["error"]["code"] == "websocket_limit_reached" and code == 4429
        assert "SWITCHYARD_WEBSOCKETS_PER_ORGANISATION" in error["error"]["message"]
        # Another organisation is not held to acme's count.
        opened(few_sockets, other.key).close()
        rows = wait_rows(5, organisation=first.organisation)
        assert (
            sorted((r.status, r.error_code) for r in rows)
            == [(200, "")] * 3 + [(429, "websocket_limit_reached")] * 2
        )
        # A socket closed by its client frees its place; one closed by the
        # server (a refused frame) too.
        a1.close()
        wait_for(lambda: _opens(few_sockets, first.key), timeout=10).close()
        a2.send("x" * 10)  # not JSON: an error frame, the socket stays
        json.loads(a2.recv(timeout=30))
        for _ in range(20):
            with contextlib.suppress(ConnectionClosed):
                a2.send(json.dumps(SLOW))
        with pytest.raises(ConnectionClosed):
            while True:
                a2.recv(timeout=30)
        b1.close()
        sockets = [wait_for(lambda: _opens(few_sockets, first.key), timeout=10) for _ in range(2)]
        third = opened(few_sockets, second.key)
        for socket in [*sockets, third]:
            socket.close()


def _opens(server, key: str):
    """An open socket for ``key``, or None when it is refused."""
    socket = connect(server, key)
    try:
        socket.send(PREWARM)
        last = frames_until_done(socket)[-1]
    except ConnectionClosed:
        last = {}
    if last.get("type") == "response.completed":
        return socket
    socket.close()
    return None


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="counted across processes in Redis")
def test_sockets_are_counted_across_processes_and_a_dead_process_frees_them(provision, simulator):
    env = server_env(SWITCHYARD_WEBSOCKETS_PER_KEY="1")
    one, two = start_daphne(env), start_daphne(env)
    try:
        acme = provision("acme", simulator.url)
        with healthz_watch(two.url):
            held = opened(one, acme.key)
            with connect(two, acme.key) as socket:
                error, code = refusal(socket)
            assert error["error"]["code"] == "websocket_limit_reached" and code == 4429
            # The process holding the place dies without closing anything: its
            # lease is renewed no more and expires.
            one.process.send_signal(signal.SIGKILL)
            one.process.wait()
            held.close_socket()
            wait_for(lambda: _opens(two, acme.key), timeout=60).close()
    finally:
        one.stop()
        two.stop()
