"""The client side of ``model_check``: requests to the API's own ASGI app, in
process, and what came back (``Answer``), for the capability checks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from responses_api.edge.routes import PREFIXES
from responses_api.models import Backend, ServedModel
from responses_api.pipeline.call import RESPONSES

# The checks go through the route a client calls.
PATH = PREFIXES[-1] + RESPONSES
REQUEST_TIMEOUT = 60.0
RAW_LIMIT = 2000


class CheckError(Exception):
    """The check cannot run (unknown organisation, model or backend)."""


@dataclass
class Result:
    name: str
    passed: bool
    detail: str = ""
    raw: str = ""
    skipped: bool = False


@dataclass
class Answer:
    """What the application answered to one request."""

    status: int = 0
    body: bytes = b""
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def terminal(self) -> dict[str, Any] | None:
        return self.events[-1] if self.events else None

    @property
    def response(self) -> dict[str, Any]:
        if self.events:
            return self.events[-1].get("response") or {}
        with contextlib.suppress(orjson.JSONDecodeError):
            data = orjson.loads(self.body)
            return data if isinstance(data, dict) else {}
        return {}

    def output(self, kind: str) -> list[dict[str, Any]]:
        return [item for item in self.response.get("output") or () if item.get("type") == kind]

    def text(self) -> str:
        return "".join(
            part.get("text", "")
            for item in self.output("message")
            for part in item.get("content") or ()
            if part.get("type") == "output_text"
        )

    def error(self) -> dict[str, Any]:
        if self.events:
            response = self.response
            return response.get("error") or self.events[-1].get("error") or {}
        with contextlib.suppress(orjson.JSONDecodeError):
            data = orjson.loads(self.body)
            if isinstance(data, dict):
                return data.get("error") or {}
        return {}

    def raw(self) -> str:
        if self.events:
            return orjson.dumps(self.events[-1]).decode()[:RAW_LIMIT]
        return self.body.decode("utf-8", "replace")[:RAW_LIMIT]


def _events(data: bytes) -> list[dict[str, Any]]:
    events = []
    for block in data.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    events.append(orjson.loads(line[5:].strip()))
    return events


class Client:
    """Requests to the API's ASGI application, as the check's key."""

    def __init__(self, key: str, backend_id: str | None, timeout: float) -> None:
        self.key = key
        self.backend_id = backend_id
        self.timeout = timeout

    def scope(self) -> dict[str, Any]:
        headers = [
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {self.key}".encode()),
            (b"user-agent", b"switchyard-model-check"),
        ]
        if self.backend_id:
            headers.append((b"x-backend-id", self.backend_id.encode()))
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": PATH,
            "raw_path": PATH.encode(),
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0),
        }

    async def send(
        self, body: dict[str, Any], *, disconnect_on: bytes | None = None
    ) -> tuple[Answer, bool]:
        """``body`` to the application; with ``disconnect_on``, go away as
        soon as the answer holds it. Returns the answer and whether it did."""
        from responses_api.edge.http import ApiConsumer

        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await inbox.put({"type": "http.request", "body": orjson.dumps(body), "more_body": False})
        answer = Answer()
        done = asyncio.Event()
        seen = asyncio.Event()

        async def receive() -> dict[str, Any]:
            return await inbox.get()

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                answer.status = message["status"]
            elif message["type"] == "http.response.body":
                answer.body += message.get("body", b"")
                if disconnect_on is not None and disconnect_on in answer.body:
                    seen.set()
                if not message.get("more_body"):
                    done.set()

        app = asyncio.ensure_future(ApiConsumer()(self.scope(), receive, send))
        left = False
        try:
            if disconnect_on is not None:
                waiting = asyncio.ensure_future(seen.wait())
                await asyncio.wait(
                    {app, waiting}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
                )
                waiting.cancel()
                if seen.is_set():
                    left = True
                    await inbox.put({"type": "http.disconnect"})
            await asyncio.wait_for(asyncio.shield(app), timeout=self.timeout)
        except TimeoutError:
            await inbox.put({"type": "http.disconnect"})
            app.cancel()
            with contextlib.suppress(BaseException):
                await app
            answer.body += b"\n(no complete answer within the timeout)"
        if answer.body.lstrip().startswith(b"event:") or b"\ndata: " in answer.body[:200]:
            answer.events = _events(answer.body)
        return answer, left


@dataclass
class Context:
    client: Client
    model: ServedModel
    backend: Backend | None
    key_id: str

    async def ask(self, **body: Any) -> Answer:
        request = {"model": self.model.public_id, "stream": True, "temperature": 0, **body}
        answer, _ = await self.client.send(request)
        return answer


Check = Callable[[Context], Awaitable[Result]]


def fail(name: str, detail: str, answer: Answer) -> Result:
    return Result(name, False, detail, answer.raw())


def completed(answer: Answer) -> str | None:
    """Why ``answer`` is not a completed response, or None."""
    if answer.status != 200:
        return f"HTTP {answer.status}"
    terminal = answer.terminal
    if terminal is None:
        return "no events in the stream"
    if terminal.get("type") != "response.completed":
        return f"the stream ended in {terminal.get('type')}, not response.completed"
    return None


# --- the capabilities ------------------------------------------------------
