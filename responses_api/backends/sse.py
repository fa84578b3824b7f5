"""Server-sent events: reading a backend's chat stream (ours are written by
``pipeline.writers``)."""

from __future__ import annotations

from typing import Any

import orjson

from responses_api.backends.client import BackendTimeout
from responses_api.protocol.errors import ApiError, trace_excerpt

# The longest SSE line accepted from a backend. A chunk is one line; the
# largest real ones (a tool call's arguments in one piece) are tens of kB.
MAX_LINE_BYTES = 1024 * 1024
# An unfinished line longer than this is kept as a list of pieces.
_PIECES_FROM = 4 * 1024


class ChunkReader:
    """Splits a chat-completions SSE byte stream into decoded JSON chunks.

    Bytes arrive cut anywhere (mid-line, mid-UTF-8 character); only complete
    lines are decoded. ``[DONE]`` sets :attr:`done`.

    The start of an unfinished line is joined to the next read, as cheap as
    it gets for the usual short line cut in two; past ``_PIECES_FROM`` bytes
    its pieces are kept in a list instead and joined once, when its newline
    arrives (joining at every read copies the line again each time:
    quadratic in its length). A line over ``MAX_LINE_BYTES`` is refused, so
    a backend that never ends a line cannot have the process buffer it
    without bound.
    """

    __slots__ = ("buffer", "done", "held", "pieces")

    def __init__(self) -> None:
        self.buffer = b""  # an unfinished line, while short
        self.pieces: list[bytes] | None = None  # a long one
        self.held = 0  # the long one's length
        self.done = False

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        if self.pieces is None:
            buffer = self.buffer + data if self.buffer else data
        elif b"\n" in data:
            self.pieces.append(data)
            buffer = b"".join(self.pieces)
            self.pieces = None
        else:
            self._hold(data)
            return []
        lines = buffer.split(b"\n")
        self.buffer = lines.pop()
        if len(buffer) > _PIECES_FROM:
            self._measure(buffer, lines)
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

    def _measure(self, buffer: bytes, lines: list[bytes]) -> None:
        """Refuse a complete line over the limit; keep a long unfinished one
        as pieces."""
        if len(buffer) > MAX_LINE_BYTES and max(map(len, lines), default=0) > MAX_LINE_BYTES:
            raise UpstreamProtocolError("the backend sent a line over 1 MB")
        if len(self.buffer) > _PIECES_FROM:
            tail, self.buffer = self.buffer, b""
            self.pieces = []
            self.held = 0
            self._hold(tail)

    def _hold(self, piece: bytes) -> None:
        assert self.pieces is not None
        self.held += len(piece)
        if self.held > MAX_LINE_BYTES:
            raise UpstreamProtocolError("the backend sent a line over 1 MB")
        self.pieces.append(piece)


class UpstreamProtocolError(Exception):
    """The backend's stream could not be understood."""


def stream_error(error: Any, backend_name: str) -> ApiError:
    """The error a backend reported inside its stream. Servers name the kind
    in ``type`` or ``code``, or only in the message. Its text is read to
    classify it and kept on the usage row for support, never passed to the
    client: a backend can be made to say anything (as with error bodies,
    ``failover.upstream_error``)."""
    error = error if isinstance(error, dict) else {"message": str(error)}
    lowered = " ".join(str(error.get(k) or "") for k in ("type", "code", "message")).lower()
    named = f"Backend '{backend_name}'"
    if ("rate" in lowered and "limit" in lowered) or "429" in lowered:
        code, message = "rate_limit_exceeded", f"{named} is rate limited."
    elif any(w in lowered for w in ("context", "too long", "invalid", "prompt")):
        code, message = "invalid_prompt", f"{named} refused the request."
    else:
        code, message = "server_error", f"{named} reported an error mid-stream."
    detail = trace_excerpt(orjson.dumps(error, default=str))
    # The client of a stream sees 200 then response.failed; the row says 502.
    return ApiError(502, message, code=code, detail=detail)


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
