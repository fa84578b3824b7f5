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
from tests.support import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def _serve(app: str) -> Proc:
    return start_daphne(app=f"tests.ops.faulty_asgi:{app}")


def _table(url: str) -> dict:
    """The server's own table of connections (this request's included), and
    whether its reaper is still scheduled."""
    return httpx.get(url + "/connections", timeout=5).json()


def _connections(url: str) -> int:
    return _table(url)["connections"]


def _serve_new_connections(url: str, count: int) -> None:
    # A new connection each time, as many clients do: none is kept alive.
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(limits=limits, timeout=5) as client:
        for _ in range(count):
            assert client.get(url + "/healthz").status_code == 200


# More connections than the table holds at rest, so that a reaper that
# stopped would leave the count far above where it started.
CONNECTIONS = 50


def test_the_server_keeps_reaping_after_an_error_in_a_started_response():
    server = _serve("application")
    try:
        floor = _connections(server.url)
        after = httpx.get(server.url + "/boom-after-start", timeout=5)
        assert after.status_code == 200 and after.content.startswith(b"data: one")
        _serve_new_connections(server.url, CONNECTIONS)
        # A later failure before the start is answered at once, in the envelope.
        failed = httpx.get(server.url + "/boom", timeout=2)
        assert failed.status_code == 500
        assert failed.json()["error"]["code"] == "server_error"
        assert failed.headers["x-request-id"]
        wait_until(lambda: _connections(server.url) <= floor, timeout=15)
        assert _table(server.url)["reaping"]
        assert server.process.poll() is None
        assert "a bug after the response started" in server.output()
    finally:
        server.stop()


def test_without_the_guard_daphne_stops_reaping():
    """What the guard is for: the same failure, unguarded, stops the reaper
    (its next pass raises), which leaves the response open for ever and every
    later connection in daphne's table (if a daphne release fixes this, the
    guard may go)."""
    server = _serve("unguarded")
    try:
        floor = _connections(server.url)
        timeout = httpx.Timeout(5, read=1)
        with (
            httpx.Client(timeout=timeout) as client,
            client.stream("GET", server.url + "/boom-after-start") as response,
        ):
            chunks = response.iter_raw()
            assert next(chunks).startswith(b"data: one")
            wait_until(lambda: not _table(server.url)["reaping"], timeout=10)
            # Its last pass is over: nothing will end the response now.
            with pytest.raises(httpx.ReadTimeout):
                next(chunks)
        _serve_new_connections(server.url, CONNECTIONS)
        # Nothing but the reaper takes a connection out of the table.
        assert _connections(server.url) >= floor + CONNECTIONS
    finally:
        server.stop()
