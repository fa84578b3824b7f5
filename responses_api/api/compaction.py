"""Compaction at the edge (docs/api/compaction.md): ``POST /v1/responses/compact``,
``POST /v1/responses/input_tokens``, and what ``POST /v1/responses`` does
with compaction items and ``compaction_trigger``.

``/responses/compact`` is ``/responses`` with ``compaction_trigger``
appended to the input, answered in the ``response.compaction`` shape: one
path to the backend, the same limits, routing and usage row. Counting
input tokens is ``auto_compact.count_tokens``: a request under the rate
limits, which generates nothing and so holds no spend.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from responses_api.backends.routing import no_backend
from responses_api.files.inline import files_inlined
from responses_api.pipeline.admission import admit
from responses_api.pipeline.auto_compact import count_tokens
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.create import (
    Mode,
    create_response,
    model_for,
)
from responses_api.pipeline.parse import parse_request, refuse_too_deep
from responses_api.pipeline.responder import JSON
from responses_api.protocol.compact import CompactRequest, CountRequest
from responses_api.protocol.errors import from_validation_error, invalid
from responses_api.store import continuation
from responses_api.store.seal import cache_salt, reasoning_seal
from responses_api.translate import compaction
from responses_api.translate.request import prepare_chat
from responses_api.usage.ratelimit import limits_release


def _object(call: Call) -> dict[str, Any]:
    """The body as a JSON object (``parse_request`` says why it is not one)."""
    content_type = call.headers.get(b"content-type", JSON).split(b";")[0].strip().lower()
    if content_type not in (JSON, b"text/json") and not content_type.endswith(b"+json"):
        parse_request(call.body, call.headers)  # raises the 415
    try:
        data = orjson.loads(call.body) if call.body else None
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        parse_request(call.body, call.headers)  # raises the error that fits
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    refuse_too_deep(data)
    return data


def _items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value)


async def compact_response(call: Call) -> Reply | None:
    """``POST /v1/responses/compact``: the conversation (``input``, after
    ``previous_response_id``'s chain) as its user messages and one
    ``compaction`` item."""
    data = _object(call)
    try:
        CompactRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    if not data.get("input") and not data.get("previous_response_id"):
        raise invalid("There is nothing to compact: send input or previous_response_id.", "input")
    body = {
        key: data[key]
        for key in ("model", "instructions", "previous_response_id", "reasoning")
        if data.get(key) is not None
    }
    if data.get("prompt_cache_key"):
        body["prompt_cache_key"] = data["prompt_cache_key"]
    body["input"] = [*_items(data.get("input")), {"type": "compaction_trigger"}]
    body["store"] = False
    call.body = orjson.dumps(body)
    call.headers = {**call.headers, b"content-type": b"application/json"}
    return await create_response(call, mode=Mode(compacted=True))


_COUNTED = (
    "model",
    "instructions",
    "previous_response_id",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "truncation",
)


async def count_input_tokens(call: Call) -> Reply:
    """``POST /v1/responses/input_tokens``: the tokens the input of the
    same ``/responses`` request would take, as its backend counts them."""
    exchange = call.exchange
    caller = exchange.caller
    assert caller is not None
    data = _object(call)
    try:
        asked = CountRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    if asked.model is None:
        raise invalid("model is required: the model's backend counts the tokens.", "model")
    body = {key: data[key] for key in _COUNTED if data.get(key) is not None}
    body["input"] = _items(data.get("input"))
    request = parse_request(orjson.dumps(body), {})
    exchange.asked(model=request.model, stream=False, prompt_cache_key=None)
    model = await model_for(caller, request.model)
    exchange.served_by(model)
    if request.previous_response_id is not None:
        if caller.retention_policy != "store":
            raise invalid(
                "previous_response_id cannot be used: this organisation stores nothing "
                "(zero data retention). Send the whole conversation as input items.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        request = (await continuation.prepare(caller, request)).request
    request = await files_inlined(caller.organisation_id, request)
    seal = reasoning_seal(caller.organisation_id)
    request = compaction.resolve(request, seal=seal, model_id=model.public_id).request
    draft = prepare_chat(
        request,
        limits=model.limits,
        seal=seal,
        cache_salt=cache_salt(caller.organisation_id),
    )
    if not model.routes:
        raise no_backend(model, "it has no enabled backend")
    route = model.routes[0]
    plan = draft.for_route(
        upstream_model=route.upstream_name,
        dialect=route.backend.dialect,
        extra_body=route.backend.extra_body,
    )
    # A request under the rate limits, but no tokens generated: no spend held.
    admission = await admit(exchange=exchange, estimate=0, draft=draft, generate=False)
    try:
        counted = await count_tokens(route, plan)
    finally:
        if admission is not None:
            release = limits_release(admission=admission, tokens=0)
            if release is not None:
                await exchange.give_back(release)
    return Reply({"object": "response.input_tokens", "input_tokens": counted})
