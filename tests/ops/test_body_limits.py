"""Request bodies against a web process as deployed (``python -m config.serve``):
a body over the cap or too slow is refused while it arrives, before daphne
would hold all of it in memory, with the API's error envelope."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import server_env, start_daphne

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

CAP = 64 * 1024


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker):
    server = start_daphne(
        server_env(SWITCHYARD_MAX_BODY_BYTES=str(CAP), SWITCHYARD_BODY_TIMEOUT_SECONDS="1")
    )
    yield server
    server.stop()


def connect(web) -> socket.socket:
    return socket.create_connection(("127.0.0.1", web.port), timeout=10)


def head(length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        "POST /v1/responses HTTP/1.1\r\nHost: x\r\n"
        "Authorization: Bearer sy_sk_nobody-0000000000\r\n"
        f"Content-Type: application/json\r\nConnection: close\r\n{framing}\r\n\r\n"
    ).encode()


def answer(sock: socket.socket) -> tuple[int, dict[bytes, bytes], dict]:
    received = b""
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        received += data
    status_line, _, rest = received.partition(b"\r\n")
    header_block, _, body = rest.partition(b"\r\n\r\n")
    headers = {}
    for line in header_block.split(b"\r\n"):
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, orjson.loads(body)


def test_a_declared_length_over_the_cap_is_refused_before_any_body_byte(web):
    sock = connect(web)
    sock.sendall(head(100 * 1024 * 1024))  # headers only: not one byte of the body
    status, headers, body = answer(sock)
    assert status == 413
    assert body["error"]["code"] == "request_too_large"
    assert body["error"]["type"] == "invalid_request_error"
    assert headers[b"x-request-id"]
    assert headers[b"connection"] == b"close"


def test_a_chunked_body_is_refused_once_it_passes_the_cap(web):
    sock = connect(web)
    sock.sendall(head(None))
    piece = b"x" * 4096
    sent = 0
    try:
        while sent <= 4 * CAP:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, _, body = answer(sock)
    assert status == 413
    assert body["error"]["code"] == "request_too_large"


def test_a_body_that_stops_arriving_gets_a_408(web):
    sock = connect(web)
    started = time.monotonic()
    sock.sendall(head(100) + b'{"model": ')  # and then nothing
    status, headers, body = answer(sock)
    assert status == 408
    assert body["error"]["code"] == "request_timeout"
    assert headers[b"x-request-id"]
    assert 0.9 <= time.monotonic() - started < 5


def test_a_body_under_the_cap_reaches_the_api(web):
    sock = connect(web)
    payload = orjson.dumps({"model": "m", "input": "x" * 1000})
    sock.sendall(head(len(payload)) + payload)
    status, _, body = answer(sock)
    assert status == 401  # read, then refused for its made-up key
    assert body["error"]["code"] == "invalid_api_key"


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_ten_huge_unauthenticated_uploads_leave_the_memory_as_it_was(web):
    """Each client tries to send 100 MB; the process stays within 20 MB."""
    before = rss_kb(web.process.pid)
    chunk = b"x" * (1024 * 1024)

    def upload() -> None:
        sock = connect(web)
        try:
            sock.sendall(head(100 * 1024 * 1024))
            for _ in range(100):
                sock.sendall(chunk)
        except OSError:
            pass  # refused and closed under us
        finally:
            sock.close()

    threads = [threading.Thread(target=upload) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    after = rss_kb(web.process.pid)
    assert after - before < 20 * 1024, f"RSS grew by {(after - before) // 1024} MB"
