"""The simulator's ``POST /v1/embeddings``: deterministic vectors.

Each input's vector comes from a hash of its text (or of its token ids),
so a test can work out the exact answer with :func:`vector_of`. Its values
are float32 numbers (exact once encoded as base64), scaled to unit length
only approximately (each value is rounded to float32 after scaling).
``dimensions`` sets the length (default ``DEFAULT_DIMENSIONS``, at most
``MAX_DIMENSIONS``: asked for more, it answers that many). The usage
counts a text's words, or its token ids.

Directives in any input text steer the answer, for tests of the gateway:

``[[status:CODE]]``      answer with this HTTP error status
``[[delay:MS]]``         wait before answering
``[[embed-bad:KIND]]``   a broken answer: ``count`` (one vector too few),
                         ``index`` (an index twice), ``ragged`` (vectors of
                         two lengths), ``nan`` (a string among the numbers),
                         ``json`` (not JSON), ``shape`` (``data`` an object)
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import struct
from typing import Any

import orjson

DEFAULT_DIMENSIONS = 16
MAX_DIMENSIONS = 4096
DIRECTIVE = re.compile(r"\[\[(status|delay|embed-bad):([\w-]+)\]\]")


def vector_of(value: str | list[int], dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """The vector of one input, as the simulator answers it."""
    seed = value.encode() if isinstance(value, str) else orjson.dumps(value)
    raw = b""
    block = 0
    while len(raw) < 4 * dimensions:
        raw += hashlib.sha256(seed + block.to_bytes(4, "big")).digest()
        block += 1
    values = [
        (n / 0xFFFFFFFF) * 2 - 1 for n in struct.unpack(f">{dimensions}I", raw[: 4 * dimensions])
    ]
    norm = math.sqrt(math.fsum(v * v for v in values)) or 1.0
    # Rounded to float32, so that JSON floats and base64 float32 agree exactly.
    return list(
        struct.unpack(
            f"<{dimensions}f", struct.pack(f"<{dimensions}f", *(v / norm for v in values))
        )
    )


def answer(body: bytes) -> tuple[int, Any, float]:
    """Status, JSON body (bytes for ``embed-bad:json``) and the delay, in
    seconds, for a ``POST /v1/embeddings`` with ``body``."""
    try:
        request = orjson.loads(body)
        given = request["input"]
        inputs = [given] if isinstance(given, str) or _tokens(given) else list(given)
        assert inputs and all(isinstance(i, str) or _tokens(i) for i in inputs)
        # Past MAX_DIMENSIONS, a model's own width: a backend that cannot shorten.
        dimensions = min(int(request.get("dimensions") or DEFAULT_DIMENSIONS), MAX_DIMENSIONS)
        assert dimensions > 0
    except Exception:
        return 400, _error("input must be a string, strings or token ids", 400), 0.0
    directives = dict(DIRECTIVE.findall(" ".join(i for i in inputs if isinstance(i, str))))
    delay = int(directives["delay"]) / 1000 if directives.get("delay", "").isdigit() else 0.0
    status = directives.get("status", "")
    if status.isdigit() and 400 <= int(status) <= 599:
        return int(status), _error("simulated failure", int(status)), delay
    data = [
        {"object": "embedding", "index": index, "embedding": vector_of(value, dimensions)}
        for index, value in enumerate(inputs)
    ]
    tokens = sum(len(i.split()) if isinstance(i, str) else len(i) for i in inputs)
    body_out: Any = {
        "object": "list",
        "data": data,
        "model": request.get("model", ""),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return 200, _broken(body_out, directives.get("embed-bad", "")), delay


def _broken(body: dict[str, Any], kind: str) -> Any:
    data = body["data"]
    if kind == "count":
        body["data"] = data[:-1]
    elif kind == "index":
        data[-1]["index"] = 0
    elif kind == "ragged":
        data[-1]["embedding"] = data[-1]["embedding"][:-1]
    elif kind == "nan":
        data[0]["embedding"][0] = "NaN"
    elif kind == "shape":
        body["data"] = {"embedding": data[0]["embedding"]}
    elif kind == "json":
        return b"{'data': not json"
    return body


def _tokens(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(type(t) is int for t in value)


def _error(message: str, status: int) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind}}


PATHS = ("/v1/embeddings", "/embeddings")


async def serve(body: bytes, send: Any) -> None:
    """Answer one ``POST /v1/embeddings`` on the ASGI ``send``."""
    status, data, delay = answer(body)
    if delay:
        await asyncio.sleep(delay)
    content = data if isinstance(data, bytes) else orjson.dumps(data)
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
