"""On a live server: what every request leaves behind, and its status line.

An authenticated request leaves exactly one usage row, whatever its method
and even when its URL or method is wrong. A request refused before
authentication leaves none: it is counted in ``/metrics`` by reason and
logged as one ``request refused`` line with its request id. Status lines
carry the standard reason phrase, also for codes Twisted's table lacks.
"""

from __future__ import annotations

import json
import socket
from http import HTTPStatus

import httpx
import pytest

from tests.conftest import server_env, start_daphne, usage_rows, wait_rows
from tests.ops.test_metrics_and_logs import samples, scrape, value

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TOKEN = "metrics-token-for-tests-5b1f"
MAX_BODY = 100_000


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    env = server_env(
        METRICS_TOKEN=TOKEN,
        LOG_FORMAT="json",
        LOG_LEVEL="INFO",
        SWITCHYARD_MAX_BODY_BYTES=str(MAX_BODY),
    )
    proc = start_daphne(env)
    yield proc
    proc.stop()


def call(server, method: str, path: str, key: str | None = None, **kwargs) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, server.url + path, headers=headers, timeout=10, **kwargs)


def refused_lines(server, request_id: str) -> list[dict]:
    found = []
    for line in server.output().splitlines():
        if request_id in line and line.startswith("{"):
            entry = json.loads(line)
            if entry.get("message") == "request refused":
                found.append(entry)
    return found


def test_get_and_delete_rows_record_their_method_and_endpoint(server, provision, simulator):
    acme = provision("acme", simulator.url)
    sent = {
        call(server, "GET", "/v1/models", acme.key): ("GET", "/models"),
        call(server, "GET", "/v1/responses/resp_abc", acme.key): ("GET", "/responses/resp_abc"),
        call(server, "DELETE", "/api/v1/responses/resp_abc", acme.key): (
            "DELETE",
            "/responses/resp_abc",
        ),
    }
    wait_rows(3, organisation=acme.organisation)
    for response, (method, endpoint) in sent.items():
        (row,) = usage_rows(request_id=response.headers["x-request-id"])
        assert (row.method, row.endpoint, row.status) == (method, endpoint, response.status_code)


def test_an_authenticated_unknown_url_or_wrong_method_leaves_one_row(server, provision, simulator):
    acme = provision("acme", simulator.url)
    unknown = call(server, "GET", "/v1/nowhere", acme.key)
    wrong = call(server, "PUT", "/v1/models", acme.key)
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_url")
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (405, "method_not_allowed")
    wait_rows(2, organisation=acme.organisation)
    # A second row for either would be queued as its request ended, before
    # the row of a request sent after both (rows are written in order): once
    # that row is in, any such row would be too.
    after = call(server, "GET", "/v1/models", acme.key)
    wait_rows(1, request_id=after.headers["x-request-id"])
    for response, method in ((unknown, "GET"), (wrong, "PUT")):
        (row,) = usage_rows(request_id=response.headers["x-request-id"])
        assert (row.method, row.status) == (method, response.status_code)
        assert not refused_lines(server, response.headers["x-request-id"])


def test_unauthenticated_refusals_leave_no_row_and_are_counted_and_logged(
    server, provision, simulator
):
    acme = provision("acme", simulator.url)
    wrong_key = "sy_sk_not-a-real-key-3f9a1c"
    before = samples(scrape(server.url).text)
    refused = {
        "invalid_api_key": call(
            server, "POST", "/v1/responses", wrong_key, json={"model": "sim-model", "input": "x"}
        ),
        "unknown_url": call(server, "GET", "/v1/nowhere"),
        "method_not_allowed": call(server, "PUT", "/v1/models"),
    }
    # An authenticated request after them: once its row is in, theirs would be.
    marker = call(server, "GET", "/v1/models", acme.key)
    wait_rows(1, request_id=marker.headers["x-request-id"])
    after = samples(scrape(server.url).text)

    for reason, response in refused.items():
        assert response.json()["error"]["code"] == reason
        request_id = response.headers["x-request-id"]
        assert usage_rows(request_id=request_id) == []
        name = "switchyard_unauthenticated_requests_total"
        assert value(after, name, reason=reason) - value(before, name, reason=reason) == 1
        (line,) = refused_lines(server, request_id)
        assert line["logger"] == "switchyard.requests"
        assert (line["status"], line["reason"]) == (response.status_code, reason)
    assert wrong_key not in server.output()


def status_line(port: int, request: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n" not in received:
            data = sock.recv(4096)
            if not data:
                break
            received += data
    return received.split(b"\r\n", 1)[0].decode("latin-1")


def post(key: str, body: bytes, length: int | None = None) -> bytes:
    return (
        b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
        % (key.encode(), len(body) if length is None else length, body)
    )


def test_status_lines_carry_the_standard_reason_phrase(server, provision, simulator):
    acme = provision("acme", simulator.url, rpm=1)
    body = json.dumps({"model": "sim-model", "input": "hello"}).encode()
    assert status_line(server.port, post(acme.key, body)) == "HTTP/1.1 200 OK"
    assert status_line(server.port, post(acme.key, body)) == "HTTP/1.1 429 " + (
        HTTPStatus(429).phrase
    )
    too_large = post(acme.key, b"", length=MAX_BODY + 1)
    assert status_line(server.port, too_large) == "HTTP/1.1 413 " + HTTPStatus(413).phrase
