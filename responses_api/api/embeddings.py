"""``POST /v1/embeddings`` (docs/api/embeddings.md): OpenAI's embeddings
endpoint over the organisation's embedding models.

The runner authenticates, traces and writes the row as for any request;
this handler parses the body once (``protocol.embeddings``), holds it to
the size limits, resolves an embedding model and answers OpenAI's
``CreateEmbeddingResponse`` with what ``pipeline.embedding.embed`` got.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings
from pydantic import ValidationError

from responses_api.backends.embeddings import Embedded, float32_base64
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.create import model_for
from responses_api.pipeline.embedding import embed
from responses_api.pipeline.parse import refuse_too_deep
from responses_api.pipeline.responder import JSON
from responses_api.protocol.embeddings import EmbeddingRequest, input_size
from responses_api.protocol.errors import ApiError, from_validation_error, invalid


async def create_embeddings(call: Call) -> Reply:
    exchange = call.exchange
    caller = exchange.caller
    assert caller is not None
    data = _object(call)
    if isinstance(data.get("model"), str):
        # Named on the row even when another field is wrong.
        exchange.asked(model=data["model"], stream=False, prompt_cache_key=None)
    try:
        request = EmbeddingRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    _within_limits(request)
    exchange.asked(model=request.model, stream=False, prompt_cache_key=None)
    model = await model_for(caller, request.model, kind="embed")
    exchange.served_by(model)
    header = call.headers.get(b"x-backend-id")
    pinned = header.decode("latin-1").strip() if header else None
    embedded = await embed(
        exchange, model=model, inputs=request.input, dimensions=request.dimensions, pinned=pinned
    )
    return Reply(embedding_response(request, embedded))


def embedding_response(request: EmbeddingRequest, embedded: Embedded) -> dict[str, Any]:
    """OpenAI's ``CreateEmbeddingResponse``, ``model`` as the client named it."""
    encode = float32_base64 if request.encoding_format == "base64" else None
    data = [
        {"object": "embedding", "index": index, "embedding": encode(v) if encode else v}
        for index, v in enumerate(embedded.vectors)
    ]
    tokens = embedded.prompt_tokens
    return {
        "object": "list",
        "data": data,
        "model": request.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _within_limits(request: EmbeddingRequest) -> None:
    most = settings.SWITCHYARD_EMBEDDINGS_MAX_INPUTS
    if len(request.input) > most:
        raise invalid(
            f"Too many inputs: {len(request.input)}; at most {most} per request.",
            param="input",
            code="too_many_inputs",
        )
    size, limit = input_size(request.input), settings.SWITCHYARD_EMBEDDINGS_MAX_CHARACTERS
    if size > limit:
        raise invalid(
            f"The inputs are too long: {size} characters (a token id counts one); "
            f"at most {limit} per request.",
            param="input",
            code="input_too_long",
        )


def _object(call: Call) -> dict[str, Any]:
    content_type = call.headers.get(b"content-type", JSON).split(b";")[0].strip().lower()
    json = content_type in (JSON, b"text/json") or content_type.endswith(b"+json")
    if content_type and not json:
        raise ApiError(415, "Content-Type must be application/json.", code="unsupported_media_type")
    if not call.body:
        raise invalid("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        data = orjson.loads(call.body)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"The request body is not valid JSON: {exc}.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    refuse_too_deep(data)
    return data
