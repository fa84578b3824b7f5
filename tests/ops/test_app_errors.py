"""An application error after the response started does not break the server.

Daphne answers an application's exception with a 500 page; once the
response has started that raises, out of the loop that reaps finished
requests and closes timed-out connections, which then never runs again.
``config.guard`` ends such a response itself; these tests run daphne on the
project's application with paths that fail on purpose
(``tests/ops/faulty_asgi.py``) and show that it keeps reaping.
"""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Proc, start_daphne
from tests.support import WaitTimeout, wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def _serve(app: str) -> Proc:
    return start_daphne(app=f"tests.ops.faulty_asgi:{app}")


def _connections(url: str) -> int:
    """The server's own table of connections (this request's included)."""
    return httpx.get(url + "/connections", timeout=5).json()["connections"]


def _fail_then_serve(url: str, count: int) -> None:
    after = httpx.get(url + "/boom-after-start", timeout=5)
    assert after.status_code == 200 and after.content.startswith(b"data: one")
    for _ in range(count):
        # A new connection each time, as many clients do.
        assert httpx.get(url + "/healthz", timeout=5).status_code == 200


@pytest.mark.timeout(180)
def test_the_server_keeps_reaping_after_an_error_in_a_started_response():
    server = _serve("application")
    try:
        floor = _connections(server.url)
        _fail_then_serve(server.url, 1_000)
        # A later failure before the start is answered at once, in the envelope.
        failed = httpx.get(server.url + "/boom", timeout=2)
        assert failed.status_code == 500
        assert failed.json()["error"]["code"] == "server_error"
        assert failed.headers["x-request-id"]
        wait_until(lambda: _connections(server.url) <= floor, timeout=15)
        assert server.process.poll() is None
        assert "a bug after the response started" in server.output()
    finally:
        server.stop()


@pytest.mark.timeout(120)
def test_without_the_guard_daphne_stops_reaping():
    """What the guard is for: the same failure, unguarded, leaves the
    response open for ever and every later connection in daphne's table (if
    a daphne release fixes this, the guard may go)."""
    server = _serve("unguarded")
    try:
        floor = _connections(server.url)
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(server.url + "/boom-after-start", timeout=3)
        for _ in range(50):
            assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
        # Twice the reaper's period, and more.
        with pytest.raises(WaitTimeout):
            wait_until(lambda: _connections(server.url) <= floor, timeout=4)
        assert _connections(server.url) >= floor + 50
    finally:
        server.stop()
