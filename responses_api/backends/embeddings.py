"""A backend's ``POST /embeddings``: the request every route is sent, and
its answer read as untrusted input (docs/api/embeddings.md).

The request travels the path every backend request does (admission,
routing, failover: ``pipeline/embedding.py``); this module knows only the
wire. A backend is always asked for ``float`` vectors, whatever the client
wants: JSON numbers can be checked one by one, and the gateway encodes
base64 itself. An answer is read up to ``SWITCHYARD_EMBEDDINGS_MAX_ANSWER_BYTES``
and must be exactly what was asked: one vector per input, each index once,
all of one length of finite float32 numbers. Anything else is a 502 naming
the backend, never a half answer passed on.
"""

from __future__ import annotations

import array
import base64
import binascii
import math
import sys
from dataclasses import dataclass
from typing import Any

import orjson
from django.conf import settings

from responses_api.backends.client import Answer, BackendError
from responses_api.protocol.errors import ApiError, invalid
from responses_api.translate.request import ChatDraft, ChatPlan

# What a backend is sent, under the API's prefix.
EMBEDDINGS_PATH = "/embeddings"
# The largest finite float32: a number past it cannot be sent as base64.
FLOAT32_MAX = 3.4028234663852886e38
# A vector longer than this is no embedding (the largest models give 8192).
MAX_DIMENSIONS = 65_536

# One input: a text, or the token ids of one.
EmbeddingInput = str | list[int]


@dataclass(frozen=True, slots=True)
class Embedded:
    """A backend's vectors, in the order of the inputs, and the input tokens
    it reports (estimated when it reports none)."""

    vectors: list[list[float]]
    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class EmbeddingDraft(ChatDraft):
    """An embeddings request in the shape the request path carries any
    backend request: admission reads its body for the spend hold's
    estimate, failover asks it for each route's body."""

    def for_route(
        self, *, upstream_model: str, dialect: str, extra_body: dict[str, Any] | None
    ) -> ChatPlan:
        # A backend's ``extra_body`` holds chat fields (sampling, templates):
        # an embeddings endpoint would refuse them, so none is sent.
        return ChatPlan(body={"model": upstream_model, **self.body})


def embedding_draft(inputs: list[EmbeddingInput], dimensions: int | None) -> EmbeddingDraft:
    body: dict[str, Any] = {"input": inputs, "encoding_format": "float"}
    if dimensions is not None:
        body["dimensions"] = dimensions
    return EmbeddingDraft(
        body=body,
        tools={},
        notices=(),
        max_output_tokens=0,
        max_tool_calls=None,
        effort=None,
        budget=None,
        has_tools=False,
        reasoning_at=(),
    )


def estimate_input_tokens(inputs: list[EmbeddingInput]) -> int:
    """About how many tokens the inputs are: a token id is one, four
    characters of text another (the estimate rate limits hold until the
    backend reports its count)."""
    return max(sum(len(i) if isinstance(i, list) else len(i) // 4 + 1 for i in inputs), 1)


async def read_embeddings(
    answer: Answer, *, count: int, dimensions: int | None, backend_name: str, estimate: int
) -> Embedded:
    """The vectors of ``answer``, checked; the 502 to answer when it is not
    a complete, well-formed answer to ``count`` inputs. With ``dimensions``,
    a backend that ignores it (llama.cpp) has its longer vectors cut to that
    length and scaled back to unit length, as OpenAI shortens its own; more
    than the model gives is the client's 400."""
    limit = settings.SWITCHYARD_EMBEDDINGS_MAX_ANSWER_BYTES
    try:
        content = await answer.read(limit + 1)
    except BackendError as exc:
        raise bad_answer(backend_name, f"its answer broke off ({type(exc).__name__})") from None
    if len(content) > limit:
        raise bad_answer(backend_name, f"its answer is longer than {limit} bytes")
    answer.complete = True
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        raise bad_answer(backend_name, "its answer is not JSON") from None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise bad_answer(backend_name, "its answer has no list of embeddings")
    if len(items) != count:
        raise bad_answer(backend_name, f"it sent {len(items)} embeddings for {count} inputs")
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(items):
        index = item.get("index", position) if isinstance(item, dict) else None
        if type(index) is not int or not 0 <= index < count or vectors[index] is not None:
            raise bad_answer(backend_name, f"embedding {position} has no index of its own")
        vectors[index] = _vector(item.get("embedding"), backend_name, position)
    checked = [v for v in vectors if v is not None]
    width = len(checked[0]) if checked else 0
    if any(len(v) != width for v in checked):
        raise bad_answer(backend_name, "its embeddings differ in length")
    if dimensions is not None and width != dimensions:
        if width < dimensions:
            raise invalid(
                f"This model's embeddings have {width} dimensions: 'dimensions' must be at "
                f"most {width}.",
                param="dimensions",
                code="invalid_value",
            )
        checked = [_shortened(v, dimensions) for v in checked]
    return Embedded(checked, _prompt_tokens(data.get("usage"), estimate))


def _vector(value: Any, backend_name: str, position: int) -> list[float]:
    """One embedding as floats: a list of finite float32 numbers, or the
    base64 of little-endian float32s (a backend that ignored ``float``)."""
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b"?"
        if len(raw) % 4:
            raise bad_answer(backend_name, f"embedding {position} is not float32 base64")
        floats = array.array("f", raw)
        if sys.byteorder == "big":
            floats.byteswap()
        value = floats.tolist()
    if not isinstance(value, list) or not 0 < len(value) <= MAX_DIMENSIONS:
        raise bad_answer(backend_name, f"embedding {position} is not a list of numbers")
    for number in value:
        kind = type(number)
        if not (kind is float or kind is int) or not -FLOAT32_MAX <= number <= FLOAT32_MAX:
            raise bad_answer(backend_name, f"embedding {position} holds a value that is no number")
    return value


def _shortened(vector: list[float], dimensions: int) -> list[float]:
    head = vector[:dimensions]
    norm = math.sqrt(math.fsum(v * v for v in head))
    return [v / norm for v in head] if norm else head


def _prompt_tokens(usage: Any, estimate: int) -> int:
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if type(tokens) is int and 0 <= tokens <= 1 << 40:
        return tokens
    return estimate


def bad_answer(backend_name: str, why: str) -> ApiError:
    return ApiError(
        502,
        f"The backend '{backend_name}' answered the embeddings request badly: {why}.",
        code="bad_gateway",
    )


def float32_base64(vector: list[float]) -> str:
    """``vector`` as the OpenAI API sends ``encoding_format: base64``: its
    float32 values, little-endian, in base64 (what the openai SDK decodes)."""
    floats = array.array("f", vector)
    if sys.byteorder == "big":
        floats.byteswap()
    return base64.b64encode(floats.tobytes()).decode("ascii")
