"""Relaying a backend's chat stream as one JSON response.

The backend is asked to stream even then: the row's ``ttft`` and the
``Server-Timing`` header need the first token's time. The body
itself is the ending's (``ending.end_exchange``), built from the translator.

An answer is read up to its output cap (``translate.output_cap``), and no
further: the backend is hung up on (the answer, not complete, closes its
connection), and the response ends ``incomplete``, or failed when the
backend's own count of tokens could not hold what it sent (:func:`past_cap`).
"""

from __future__ import annotations

import asyncio

from responses_api.backends.client import Answer, BackendError
from responses_api.backends.sse import (
    ChunkReader,
    UpstreamProtocolError,
    broken,
    malformed,
    stream_error,
)
from responses_api.protocol.errors import ApiError
from responses_api.translate.chunks import BadChunk
from responses_api.translate.stream import StreamTranslator


async def read_answer(
    answer: Answer,
    translator: StreamTranslator,
    backend_name: str,
    deadline: asyncio.Timeout | None = None,
) -> None:
    """Translate a whole answer without writing (a non-streamed response:
    the backend is still asked to stream, for ``ttft``).
    ``deadline``, the first token's, is lifted once a token arrived."""
    reader = ChunkReader()
    chunks = answer.chunks()
    try:
        while (data := await anext(chunks, None)) is not None:
            for chunk in reader.feed(data):
                if "error" in chunk and not chunk.get("choices"):
                    raise stream_error(chunk["error"], backend_name)
                translator.feed(chunk)
            if deadline is not None and translator.first_token_at is not None:
                deadline.reschedule(None)
                deadline = None
            if reader.done:
                answer.complete = True
                return
            if translator.output_cap.reached:
                past_cap(translator, backend_name)
                return
    except (UpstreamProtocolError, BackendError) as exc:
        raise broken(exc) from None
    except BadChunk as exc:
        raise malformed(backend_name, exc) from None


def past_cap(translator: StreamTranslator, backend_name: str) -> None:
    """An answer that reached its output cap ends there, incomplete; unless
    its backend had said it wrote fewer tokens than that: its count was
    false (``OutputCap.miscounted``), a 502 ``backend_error`` naming it."""
    usage = translator.usage
    if translator.output_cap.miscounted(usage.output_tokens if usage.reported else None):
        raise ApiError(
            502,
            f"Backend '{backend_name}' sent more output than the {usage.output_tokens} "
            "tokens it counted can hold.",
            code="backend_error",
        )
