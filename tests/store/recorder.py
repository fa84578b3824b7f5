"""A backend in front of the simulator that records each chat request it
relays: what the backend really received, for tests of what a stored
conversation sends."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.support import serve_in_thread


class Recorder:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[dict[str, Any]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                answer = httpx.get(recorder.upstream + self.path.removeprefix("/v1"))
                self._reply(answer.status_code, answer.headers, answer.content)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.endswith("/chat/completions"):
                    recorder.requests.append(json.loads(body))
                # Relayed as it comes (a stream's first token as soon as the
                # simulator sends it), the body ending with the connection.
                with httpx.stream(
                    "POST",
                    recorder.upstream + self.path.removeprefix("/v1"),
                    content=body,
                    headers={"content-type": "application/json"},
                    timeout=30,
                ) as answer:
                    self.send_response(answer.status_code)
                    content_type = answer.headers.get("content-type", "application/json")
                    self.send_header("content-type", content_type)
                    self.send_header("connection", "close")
                    self.end_headers()
                    for chunk in answer.iter_raw():
                        self.wfile.write(chunk)
                        self.wfile.flush()
                self.close_connection = True

            def _reply(self, status: int, headers: Any, content: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", headers.get("content-type", "application/json"))
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = serve_in_thread(self.server)

    def last_messages(self) -> list[dict[str, Any]]:
        return self.requests[-1]["messages"]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
