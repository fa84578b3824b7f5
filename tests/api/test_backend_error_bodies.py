"""A backend's error answer reaches the client as a status and a fixed
message naming the backend, never its body: a backend URL pointed at some
other service must not read that service's answers back through the
gateway. The body still classifies the error (an input past the context
window stays ``context_length_exceeded``), its first kilobyte goes to the
usage row for support, and no more than 64 KB of it is ever read."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest
from openai import APIStatusError, OpenAI

from responses_api.backends.client import ERROR_BODY_LIMIT, Upstream
from responses_api.pipeline.failover import upstream_error
from tests.conftest import wait_rows
from tests.support import serve_in_thread

SECRET = "redis_version:7.2.4 requirepass=hunter2"


class ErrorServer(ThreadingHTTPServer):
    """Answers every POST with one status and body, and records how much
    of the body it managed to write before the client went away."""

    daemon_threads = True

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status, self.body, self.extra = status, body, headers or {}
        self.written = 0
        self.cut_off = False
        self.done = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: ErrorServer

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        server = self.server
        self.send_response(server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(server.body)))
        for name, value in server.extra.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for start in range(0, len(server.body), 64 * 1024):
                chunk = server.body[start : start + 64 * 1024]
                self.wfile.write(chunk)
                server.written += len(chunk)
            self.wfile.flush()
        except OSError:
            server.cut_off = True
        finally:
            server.done.set()

    def log_message(self, *args: object) -> None:
        pass


def serve(status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorServer:
    server = ErrorServer(status, body, headers)
    serve_in_thread(server)
    return server


@pytest.fixture
def error_server() -> Iterator[list[ErrorServer]]:
    started: list[ErrorServer] = []
    yield started
    for server in started:
        server.shutdown()
        server.server_close()


def _body(message: str, size: int = 3000) -> bytes:
    """An error body whose message starts with ``message`` and is padded
    past a kilobyte, the rest marked so a test can tell what was kept."""
    text = orjson.dumps({"error": {"message": message + " " + "x" * size + " TAIL-MARK"}})
    return text


# --- what the client is told -------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "code", "client_status"),
    [
        (500, {"error": {"message": SECRET}}, "bad_gateway", 502),
        (502, SECRET, "bad_gateway", 502),
        (400, {"error": {"message": SECRET, "code": "x" + SECRET}}, "invalid_prompt", 400),
        (400, {"error": {"message": "maximum context length exceeded " + SECRET}},
         "context_length_exceeded", 400),
        (413, {"detail": "Input too long " + SECRET}, "context_length_exceeded", 400),
        (429, {"error": {"message": SECRET}}, "rate_limit_exceeded", 429),
        (401, {"error": SECRET}, "backend_auth_failed", 502),
        (404, {"error": {"message": "The model " + SECRET}}, "backend_model_not_found", 502),
    ],
)  # fmt: skip
def test_an_error_body_classifies_the_error_but_is_never_echoed(status, body, code, client_status):
    content = body.encode() if isinstance(body, str) else orjson.dumps(body)
    error = upstream_error(status, content, {}, "gpu1")
    assert (error.status, error.code) == (client_status, code)
    assert SECRET not in error.message and "hunter2" not in orjson.dumps(error.body()).decode()
    assert "'gpu1'" in error.message and str(status) in error.message
    assert SECRET in error.detail


def test_only_a_numeric_retry_after_is_passed_on():
    passed = upstream_error(429, b"{}", {"retry-after": "7"}, "gpu1")
    assert passed.headers == [(b"retry-after", b"7")]
    replaced = upstream_error(429, b"{}", {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, "g")
    assert replaced.headers == [(b"retry-after", b"5")]


def test_the_usage_row_keeps_the_first_kilobyte_without_nul_bytes():
    error = upstream_error(500, b"\x00" + b"a" * 2000, {}, "gpu1")
    assert error.detail == "Body: \ufffd" + "a" * 1023


@pytest.mark.django_db(transaction=True)
def test_a_backends_500_reaches_the_client_without_its_body(api_server, provision, error_server):
    server = serve(500, _body(SECRET))
    error_server.append(server)
    tenant = provision("acme", server.url, backend_name="gpu1")
    client = OpenAI(base_url=api_server.url + "/v1", api_key=tenant.key, max_retries=0)
    with pytest.raises(APIStatusError) as caught:
        client.responses.create(model="sim-model", input="hi")
    assert caught.value.status_code == 502
    error = caught.value.response.json()["error"]
    assert error["message"] == "The backend 'gpu1' answered 500."
    assert error["code"] == "bad_gateway"
    assert "hunter2" not in caught.value.response.text
    row = wait_rows(organisation=tenant.organisation)[0]
    # Support reads the body's first kilobyte in the trace, no more.
    assert row.status == 502 and SECRET in row.error_message
    assert "TAIL-MARK" not in row.error_message
    assert row.error_message.startswith("The backend 'gpu1' answered 500. Body: ")


@pytest.mark.django_db(transaction=True)
def test_a_context_length_error_keeps_its_code_but_not_its_text(
    api_server, provision, error_server
):
    server = serve(400, _body("This model's maximum context length is 4096 tokens. " + SECRET))
    error_server.append(server)
    tenant = provision("acme", server.url, backend_name="gpu1")
    client = OpenAI(base_url=api_server.url + "/v1", api_key=tenant.key, max_retries=0)
    with pytest.raises(APIStatusError) as caught:
        client.responses.create(model="sim-model", input="hi")
    assert caught.value.status_code == 400
    error = caught.value.response.json()["error"]
    assert (error["code"], error["param"]) == ("context_length_exceeded", "input")
    assert "hunter2" not in caught.value.response.text and "4096" not in error["message"]


# --- how much of it is read --------------------------------------------------


def test_a_huge_error_body_is_read_only_up_to_64_kb(error_server):
    size = 10 * 1024 * 1024
    server = serve(500, b"e" * size)
    error_server.append(server)

    async def main() -> int:
        upstream = Upstream(server.url, "sk")
        try:
            answer = await upstream.send_chat({"model": "m", "messages": []})
            assert answer.status == 500
            body = await answer.read()
            answer.close()
            return len(body)
        finally:
            await upstream.aclose()

    assert asyncio.run(main()) == ERROR_BODY_LIMIT == 64 * 1024
    assert server.done.wait(10)
    # The connection was closed with most of the body unsent.
    assert server.cut_off and server.written < size
