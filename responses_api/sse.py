"""Server-sent events: reading the backend's chat stream, writing ours."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from responses_api.backends.client import BackendTimeout
from responses_api.errors import ApiError


class EventWriter:
    """Numbers and encodes Responses events. The only place that assigns
    ``sequence_number``; events written together become one buffer, so one
    network write carries every event that was ready."""

    __slots__ = ("delta_sent", "sequence")

    def __init__(self) -> None:
        self.sequence = 0
        self.delta_sent = False  # the first text delta has been written out

    def encode(self, events: Iterable[dict[str, Any]]) -> bytes:
        out = []
        for event in events:
            event["sequence_number"] = self.sequence
            self.sequence += 1
            out.append(b"event: %s\ndata: %s\n\n" % (event["type"].encode(), orjson.dumps(event)))
        return b"".join(out)


class ChunkReader:
    """Splits a chat-completions SSE byte stream into decoded JSON chunks.

    Bytes arrive cut anywhere (mid-line, mid-UTF-8 character); only complete
    lines are decoded. ``[DONE]`` sets :attr:`done`.
    """

    __slots__ = ("buffer", "done")

    def __init__(self) -> None:
        self.buffer = b""
        self.done = False

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        buffer = self.buffer + data if self.buffer else data
        lines = buffer.split(b"\n")
        self.buffer = lines.pop()
        chunks = []
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # comments, event names, blank separators
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                continue
            if not payload:
                continue
            try:
                value = orjson.loads(payload)
            except orjson.JSONDecodeError as exc:
                raise UpstreamProtocolError(
                    f"backend sent invalid JSON in its stream: {exc}"
                ) from exc
            if isinstance(value, dict):
                chunks.append(value)
        return chunks


class UpstreamProtocolError(Exception):
    """The backend's stream could not be understood."""


def stream_error(error: Any) -> ApiError:
    """The error a backend reported inside its stream. Servers name the kind
    in ``type`` or ``code``, or only in the message."""
    error = error if isinstance(error, dict) else {"message": str(error)}
    message = str(error.get("message") or "the backend reported an error")
    lowered = " ".join(str(error.get(k) or "") for k in ("type", "code", "message")).lower()
    if ("rate" in lowered and "limit" in lowered) or "429" in lowered:
        code = "rate_limit_exceeded"
    elif any(w in lowered for w in ("context", "too long", "invalid", "prompt")):
        code = "invalid_prompt"
    else:
        code = "server_error"
    # The client of a stream sees 200 then response.failed; the row says 502.
    return ApiError(502, message, code=code)


def malformed(backend_name: str, exc: Exception) -> ApiError:
    """The error of a backend answer that is not Chat Completions (a chunk
    of the wrong shape): the backend's fault, named, whether it came before
    the response started (a 502) or after (``response.failed``)."""
    return ApiError(
        502,
        f"Backend '{backend_name}' sent an answer that is not Chat Completions: {exc}.",
        code="backend_error",
    )


def broken(exc: Exception) -> ApiError:
    """The error of a backend answer that broke off while being relayed."""
    if isinstance(exc, UpstreamProtocolError):
        return ApiError(502, str(exc), code="server_error")
    why = "ReadTimeout" if isinstance(exc, BackendTimeout) else "connection lost"
    return ApiError(502, f"The backend connection failed mid-stream ({why}).", code="server_error")
