"""``POST /v1/responses``: validate, admit, open a backend, relay its answer.

The handler reads top to bottom as the request goes: parse the body (once,
into typed models), find the model, decide what is stored, admit the
request under the caller's limits, translate it once, then open a backend
(``failover.upstream``, which retries elsewhere until one answers) and relay
its answer as a stream or as one JSON body (``relay``). Whatever happens,
the runner then calls the one ending (``ending.end_exchange``), which
writes the row and what the client is owed.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
from pydantic import ValidationError

from responses_api.access.auth import Caller
from responses_api.backends.routing import affinity_key, no_backend
from responses_api.catalogue.catalog import ModelEntry, get_catalog
from responses_api.pipeline import auto_compact, failover
from responses_api.pipeline.admission import admit
from responses_api.pipeline.call import Call, Output, Reply
from responses_api.pipeline.exchange import Exchange
from responses_api.pipeline.relay import read_answer, relay_stream
from responses_api.pipeline.responder import JSON
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import (
    ApiError,
    from_validation_error,
    invalid,
    param_path,
    too_deep,
)
from responses_api.store import continuation, conversation_turns
from responses_api.store.background import Replacing
from responses_api.store.responses import Stored
from responses_api.store.seal import cache_salt, reasoning_seal
from responses_api.translate import compaction
from responses_api.translate.items import new_id
from responses_api.translate.request import ChatPlan, prepare_chat
from responses_api.translate.response import echo_settings
from responses_api.translate.stream import StreamTranslator
from responses_api.usage.ratelimit import estimate_tokens, limits_release


async def create_response(
    call: Call, request: CreateResponse | None = None, *, background: str | None = None
) -> Reply | None:
    """``request`` when parsed already; ``background``: the id of the queued
    background response this run answers (``background_run``)."""
    exchange = call.exchange
    caller = exchange.caller
    assert caller is not None
    if request is None:
        request = parse_request(call.body, call.headers)
    exchange.asked(
        model=request.model,
        stream=bool(request.stream),
        prompt_cache_key=request.prompt_cache_key,
    )
    model = await model_for(caller, request.model)
    exchange.served_by(model)
    # A WebSocket continues its own last response without the store.
    local = call.chain.continued(request) if call.chain is not None else None
    store = _store_decision(request, caller, exchange, continued=local is not None)
    response_id = background or new_id("resp")
    previous: Stored | None = None
    references: dict[str, Any] = {}
    joined = await conversation_turns.join(caller, request) if request.conversation else None
    if local is not None:
        request = local
    elif caller.retention_policy == "store":
        prepared = await continuation.prepare(caller, request)
        request, previous, references = prepared.request, prepared.previous, prepared.references
    if call.chain is not None:
        call.chain.asked(request)
    if joined is not None:
        request = joined.prepend(request)
    affinity = affinity_for(caller, model, request, previous, response_id if store else None)
    if store:
        call.keep = (Replacing if background else continuation.Keep)(
            organisation_id=caller.organisation_id,
            ttl_hours=caller.store_ttl_hours,
            body=call.body,
            instructions=request.instructions,
            previous=previous,
            references=references,
            affinity=affinity or "",
        )
    if joined is not None:
        call.keep = joined.keep(call.keep, caller=caller, body=call.body, references=references)
    seal = reasoning_seal(caller.organisation_id)
    compacting = compaction.resolve(request, seal=seal, model_id=model.public_id)
    request = compacting.request
    salt = cache_salt(caller.organisation_id)
    draft = prepare_chat(request, limits=model.limits, seal=seal, cache_salt=salt)
    if not model.routes:
        raise no_backend(model, "it has no enabled backend")
    # A prewarm (``generate: false``) reaches no backend: it counts as a
    # request under the rate limits, with no tokens, and holds no spend.
    # One that may compact first holds for both of its backend calls.
    admission = await admit(
        exchange=exchange,
        estimate=estimate_tokens(call.body),
        draft=draft,
        generate=call.generate,
        calls=1 if compaction.threshold(request, model.limits.context_window) is None else 2,
    )
    try:
        ahead = await auto_compact.ahead(
            call, model=model, request=request, draft=draft, affinity=affinity
        )
        if ahead is not None:
            request, draft = ahead.request, ahead.draft
        first = model.routes[0]
        # The plan for the first route gives the echoed settings; a stream
        # that starts while queued announces them.
        preview = draft.for_route(
            upstream_model=first.upstream_name,
            dialect=first.backend.dialect,
            extra_body=first.backend.extra_body,
        )
        base = new_translator(request, preview, store, response_id, quiet=not exchange.stream)
        output = call.output = Output(
            compacting.translator(
                ahead.answer(base) if ahead is not None else base,
                compacted=call.params.get(compaction.SHAPE) == compaction.COMPACTED,
            ),
            preview,
            call.responder.writer() if exchange.stream else None,
        )
        pinned = call.headers.get(b"x-backend-id")
        upstream = failover.upstream(
            exchange,
            draft=draft,
            model=model,
            pinned=pinned.decode("latin-1").strip() if pinned else None,
            affinity=affinity,
        )
        if not call.generate:
            await _prewarm(call, output)
        elif exchange.stream:
            await relay_stream(call, output, upstream)
        else:
            await _relay_json(exchange, output, upstream, model.first_token_timeout)
    finally:
        # The one place the answer's usage is recorded: the rate limits
        # settle on it here, the row and the response's timing later.
        if call.output is not None:
            translator = call.output.translator
            exchange.produced(translator.final_usage(), translator.first_token_at)
        if admission is not None:
            # Input tokens the backend never reported (a cancelled request)
            # stay counted at the admission estimate.
            used = (exchange.input_tokens or admission.estimate) + exchange.output_tokens
            release = limits_release(admission=admission, tokens=used)
            if release is not None:
                await exchange.give_back(release)
    return None


async def _prewarm(call: Call, output: Output) -> None:
    """A response that only starts and ends: its id continues a chain."""
    assert output.writer is not None
    await call.responder.start_stream()
    await call.responder.chunk(output.writer.encode(output.translator.start()))


async def _relay_json(
    exchange: Exchange,
    output: Output,
    upstream: AbstractAsyncContextManager[failover.Attempt],
    first_token_timeout: float,
) -> None:
    """Read the whole answer. A stream shows it is alive with keep-alive
    events; a JSON answer cannot, so a backend that sends no token within
    the model's first-token timeout (queueing included) is a 504 rather
    than a connection held for the read timeout."""
    waiting = failover.first_token_deadline(exchange, first_token_timeout)
    async with waiting as deadline, upstream as attempt:
        output.plan = attempt.plan
        await read_answer(attempt.answer, output.translator, attempt.route.backend.name, deadline)


def parse_request(body: bytes, headers: dict[bytes, bytes]) -> CreateResponse:
    content_type = headers.get(b"content-type", JSON).split(b";")[0].strip()
    if (
        content_type
        and content_type.lower() not in (JSON, b"text/json")
        and not content_type.endswith(b"+json")
    ):
        raise ApiError(
            415,
            "Content-Type must be application/json.",
            code="unsupported_media_type",
        )
    if not body:
        raise invalid("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _not_json(body, exc) from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    refuse_too_deep(data)
    try:
        return CreateResponse.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    except RecursionError:
        raise invalid("The request body is nested too deeply.", code="invalid_json") from None


# JSON nesting accepted in a request body, the body itself being level 1.
# orjson parses 1024 levels but writes only 255, and fields are written
# again (to the backend, into the echoed response and its events, a few
# levels under their envelope): no real schema or argument comes near 128.
MAX_DEPTH = 128


def _not_json(body: bytes, exc: orjson.JSONDecodeError) -> ApiError:
    if exc.msg.startswith("depth limit exceeded"):
        return too_deep(MAX_DEPTH)
    try:
        body.decode()
    except UnicodeDecodeError as bad:
        # Checked only here: orjson speaks of surrogates for any bad byte.
        return invalid(
            f"The request body is not valid UTF-8 (byte {bad.start}); JSON must be UTF-8.",
            code="invalid_json",
        )
    return invalid(
        f"The request body is not valid JSON: {exc}. Check that it is a single JSON object.",
        code="invalid_json",
    )


def refuse_too_deep(data: dict[str, Any]) -> None:
    """A 400 naming the field when a body nests deeper than ``MAX_DEPTH``:
    items are stored and relayed as JSON, which nests only so deep."""
    if _too_deep(data):
        raise too_deep(MAX_DEPTH, param=_deep_param(data) or None)


def _too_deep(data: dict[str, Any]) -> bool:
    """Whether ``data`` nests deeper than ``MAX_DEPTH``: one level at a time,
    looking only for containers (on every request's path)."""
    level: list[Any] = [data]
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            return True
        below: list[Any] = []
        for container in level:
            for value in container.values() if type(container) is dict else container:
                kind = type(value)
                if kind is dict or kind is list:
                    below.append(value)
        level = below
        depth += 1
    return False


# Parts of a request that hold items, tools or parts: a path is named
# through them down to the first free-form field.
_STRUCTURE = frozenset({"input", "tools", "content", "output", "text", "format", "summary"})


def _deep_param(data: dict[str, Any]) -> str:
    """The field (``tools[0].parameters``) holding the nesting too deep."""
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if len(path) >= MAX_DEPTH:
            break
        items = value.items() if type(value) is dict else enumerate(value)
        stack.extend((child, [*path, key]) for key, child in items if type(child) in (dict, list))
    else:
        return ""  # not reached: called on data found too deep
    named: list[str | int] = []
    for part in path:
        named.append(part)
        if isinstance(part, str) and part not in _STRUCTURE:
            break
        if isinstance(part, int) and len(named) > 1 and isinstance(named[-2], int):
            break  # a list in a list is no request structure
    return param_path(named)


async def model_for(caller: Caller, name: str) -> ModelEntry:
    catalog = await get_catalog(caller.organisation_id)
    model = catalog.by_name.get(name)
    if model is None:
        catalog = await get_catalog(caller.organisation_id, missing=name)
        model = catalog.by_name.get(name)
    if model is None:
        raise ApiError(
            404,
            f"The model '{name}' does not exist or you do not have access to it. "
            "Pick one of the models listed by GET /v1/models.",
            code="model_not_found",
            param="model",
        )
    allowed = caller.allowed_models
    if allowed and model.public_id not in allowed and name not in allowed:
        raise ApiError(
            403,
            f"This API key may not use the model '{name}'.",
            code="model_not_allowed",
            param="model",
        )
    return model


def _store_decision(
    request: CreateResponse, caller: Caller, exchange: Exchange, *, continued: bool = False
) -> bool:
    if caller.retention_policy != "store":
        if request.previous_response_id is not None and not continued:
            raise invalid(
                "previous_response_id cannot be used: this organisation stores nothing "
                "(zero data retention). Send the whole conversation as input items.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        if request.store is True:
            exchange.notice("store_ignored", "store was ignored: this organisation stores nothing.")
        return False
    return request.store is not False


def affinity_for(
    caller: Caller,
    model: ModelEntry,
    request: CreateResponse,
    previous: Stored | None,
    response_id: str | None,
) -> str | None:
    """A chain keeps the affinity its first response had (its later turns
    carry other instructions, or none), so it stays on the backend holding
    its prefix; a stored response that starts a conversation with a lone
    string gets one by its own id."""
    if previous is not None and previous.affinity and not request.prompt_cache_key:
        return previous.affinity
    key = affinity_key(
        organisation_id=caller.organisation_id,
        model_id=model.id,
        prompt_cache_key=request.prompt_cache_key,
        instructions=request.instructions,
        input=request.input,
    )
    if key is None and response_id is not None:
        key = affinity_key(
            organisation_id=caller.organisation_id,
            model_id=model.id,
            prompt_cache_key=response_id,
            instructions=None,
            input=(),
        )
    return key


def new_translator(
    request: CreateResponse, plan: ChatPlan, store: bool, response_id: str, *, quiet: bool
) -> StreamTranslator:
    echo = echo_settings(
        request,
        store=store,
        temperature=plan.body.get("temperature"),
        top_p=plan.body.get("top_p"),
        max_output_tokens=plan.max_output_tokens,
    )
    if request.background:
        echo["background"] = True
    if request.conversation is not None:
        echo["conversation"] = {"id": request.conversation_id()}
    return StreamTranslator(
        response_id=response_id,
        model=request.model,
        echo=echo,
        tools=plan.tools,
        max_tool_calls=plan.max_tool_calls,
        quiet=quiet,
        seal=plan.seal,
        max_output_tokens=plan.max_output_tokens,
    )
