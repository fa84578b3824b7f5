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

import functools
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from responses_api.access.auth import Caller
from responses_api.backends.routing import affinity_key, no_backend
from responses_api.catalogue.catalog import ModelEntry
from responses_api.files.inline import files_inlined
from responses_api.pipeline import auto_compact, failover
from responses_api.pipeline.admission import admit
from responses_api.pipeline.call import Call, Output, Reply
from responses_api.pipeline.exchange import Exchange
from responses_api.pipeline.hosted import HostedKinds, hosted_closed
from responses_api.pipeline.model_lookup import model_for
from responses_api.pipeline.parse import parse_request
from responses_api.pipeline.relay import read_answer, relay_stream
from responses_api.pipeline.tool_loop import answer_with_tools, hosted_tools
from responses_api.pipeline.turn_state import turn_backend
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import invalid
from responses_api.store import continuation, conversation_turns
from responses_api.store.background import Replacing
from responses_api.store.responses import Stored
from responses_api.store.seal import cache_salt, reasoning_seal
from responses_api.translate import compaction
from responses_api.translate.items import new_id
from responses_api.translate.request import ChatDraft, ChatPlan, prepare_chat
from responses_api.translate.response import echo_settings
from responses_api.translate.stream import StreamTranslator
from responses_api.usage.ratelimit import Admission, estimate_tokens, limits_release

if TYPE_CHECKING:
    from responses_api.pipeline.local_chain import LocalChain
    from responses_api.store.continuation import Keep


@dataclass(frozen=True, slots=True)
class Mode:
    """How a create was asked for, by the handler or transport that runs it:
    set before the pipeline starts, read by its stages, changed by none."""

    # The id of the queued background response a worker's run answers.
    background: str | None = None
    # A WebSocket's own last response, which the socket continues without the store.
    chain: LocalChain | None = None
    # False: a WebSocket prewarm, which starts and ends a response and reaches no backend.
    generate: bool = True
    # ``/responses/compact``: answered as one ``response.compaction`` object.
    compacted: bool = False


PLAIN = Mode()


@dataclass(frozen=True, slots=True)
class Plan:
    """What the request is, once continued and translated: decided once,
    before admission, by :func:`plan_response`."""

    # The request as its backends answer it: continued, joined to its
    # conversation, compaction items resolved.
    request: CreateResponse
    model: ModelEntry
    response_id: str
    store: bool
    # How the ending stores it (None: it is not stored).
    keep: Keep | None
    affinity: str | None
    draft: ChatDraft
    compacting: compaction.Compacting
    # The request's MCP servers and the tools they offer (None: it has none).
    hosted: HostedKinds | None = None


async def create_response(
    call: Call, request: CreateResponse | None = None, *, mode: Mode = PLAIN
) -> Reply | None:
    """The stages, in order: parse (unless ``request`` is parsed already),
    resolve the model, plan, admit, generate, settle. The ending is the
    runner's."""
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
    plan = await plan_response(call, request, model, mode)
    # A prewarm (``generate: false``) reaches no backend: it counts as a
    # request under the rate limits, with no tokens, and holds no spend.
    # One that may compact first holds for both of its backend calls.
    calls = 1 if compaction.threshold(plan.request, model.limits.context_window) is None else 2
    # The MCP sessions the listing opened end with the response.
    async with hosted_closed(plan.hosted):
        admission = await admit(
            exchange=exchange,
            estimate=estimate_tokens(call.body),
            draft=plan.draft,
            generate=mode.generate,
            calls=calls,
        )
        try:
            await generate(call, plan, mode)
        finally:
            await settle(exchange, call.output, admission)
    return None


async def plan_response(call: Call, request: CreateResponse, model: ModelEntry, mode: Mode) -> Plan:
    """Continue ``request`` (a socket's own chain, the stored one, its
    conversation), decide what is stored and where it has affinity, and
    translate it once."""
    caller = call.exchange.caller
    assert caller is not None
    local = mode.chain.continued(request) if mode.chain is not None else None
    store = _store_decision(request, caller, call.exchange, continued=local is not None)
    response_id = mode.background or new_id("resp")
    call.exchange.responding(response_id, background=mode.background is not None)
    previous: Stored | None = None
    references: dict[str, Any] = {}
    joined = await conversation_turns.join(caller, request) if request.conversation else None
    if local is not None:
        request = local
    elif caller.retention_policy == "store":
        prepared = await continuation.prepare(caller, request)
        request, previous, references = prepared.request, prepared.previous, prepared.references
    if mode.chain is not None:
        mode.chain.asked(request)
    if joined is not None:
        request = joined.prepend(request)
    affinity = affinity_for(caller, model, request, previous, response_id if store else None)
    keep: Keep | None = None
    if store:
        keep = (Replacing if mode.background else continuation.Keep)(
            organisation_id=caller.organisation_id,
            ttl_hours=caller.store_ttl_hours,
            body=call.body,
            instructions=request.instructions,
            previous=previous,
            references=references,
            affinity=affinity or "",
        )
    if joined is not None:
        keep = joined.keep(keep, caller=caller, body=call.body, references=references)
    request = await files_inlined(caller.organisation_id, request)
    seal = reasoning_seal(caller.organisation_id)
    compacting = compaction.resolve(request, seal=seal, model_id=model.public_id)
    request = compacting.request
    if not model.routes:
        raise no_backend(model, "it has no enabled backend")
    hosted = await hosted_tools(caller, request)
    async with hosted_closed(hosted, on_error=True):
        draft = translated(caller, model, hosted, request)
    return Plan(request, model, response_id, store, keep, affinity, draft, compacting, hosted)


def translated(
    caller: Caller, model: ModelEntry, hosted: HostedKinds | None, request: CreateResponse
) -> ChatDraft:
    """``request`` as every route's chat request starts (``ChatDraft``), with
    the functions of the hosted tools the gateway runs offered in their place."""
    return prepare_chat(
        request,
        limits=model.limits,
        seal=reasoning_seal(caller.organisation_id),
        cache_salt=cache_salt(caller.organisation_id),
        hosted=hosted.tools() if hosted is not None else None,
    )


async def generate(call: Call, plan: Plan, mode: Mode) -> None:
    """Summarise first when the request is past its compaction threshold,
    open a backend (failing over until one answers) and relay its answer."""
    exchange, model = call.exchange, plan.model
    request, draft = plan.request, plan.draft
    # A background run streams its events to the response's log, whether or
    # not its client streamed the POST that queued it (which its row records).
    streamed = exchange.asking.stream or mode.background is not None
    ahead = await auto_compact.ahead(
        call, model=model, request=request, draft=draft, affinity=plan.affinity
    )
    if ahead is not None:
        request, draft = ahead.request, ahead.draft
        if plan.hosted is not None:  # the summary's draft offers no hosted tool
            caller = exchange.caller
            assert caller is not None
            draft = translated(caller, model, plan.hosted, request)
    first = model.routes[0]
    # The plan for the first route gives the echoed settings; a stream
    # that starts while queued announces them.
    preview = draft.for_route(
        upstream_model=first.upstream_name,
        dialect=first.backend.dialect,
        extra_body=first.backend.extra_body,
    )
    base = new_translator(request, preview, plan.store, plan.response_id, quiet=not streamed)
    output = call.output = Output(
        plan.compacting.translator(
            ahead.answer(base) if ahead is not None else base, compacted=mode.compacted
        ),
        preview,
        call.responder.writer() if streamed else None,
        plan.keep,
    )
    header = call.headers.get(b"x-backend-id")
    pinned = header.decode("latin-1").strip() if header else None
    assert exchange.caller is not None
    turn, token = None, ""
    if len(model.routes) > 1:
        # A model on one backend has no turn to keep in place.
        turn, token = turn_backend(call.headers, exchange.caller.organisation_id, model)
    if token:
        exchange.turn_held(token)

    def upstream(draft: ChatDraft) -> AbstractAsyncContextManager[failover.Attempt]:
        return failover.upstream(
            exchange, draft=draft, model=model, pinned=pinned, affinity=plan.affinity, turn=turn
        )

    async def relay(upstream: AbstractAsyncContextManager[failover.Attempt]) -> None:
        if streamed:
            await relay_stream(call, output, upstream)
        else:
            await _relay_json(exchange, output, upstream, model.first_token_timeout)

    if not mode.generate:
        await _prewarm(call, output)
    elif plan.hosted is None:
        await relay(upstream(draft))
    else:
        caller = exchange.caller
        assert caller is not None
        await answer_with_tools(
            call,
            output,
            plan.hosted,
            request,
            draft=draft,
            open_upstream=upstream,
            relay=relay,
            translate=functools.partial(translated, caller, model, plan.hosted),
        )


async def settle(exchange: Exchange, output: Output | None, admission: Admission | None) -> None:
    """The one place the answer's usage is recorded: the rate limits settle
    on it here, the row and the response's timing later. Input tokens the
    backend never reported (a cancelled request) stay counted at the
    admission estimate."""
    if output is not None:
        translator = output.translator
        exchange.produced(translator.final_usage(), translator.first_token_at)
    if admission is not None:
        used = (exchange.input_tokens or admission.estimate) + exchange.output_tokens
        release = limits_release(admission=admission, tokens=used)
        if release is not None:
            await exchange.give_back(release)


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
