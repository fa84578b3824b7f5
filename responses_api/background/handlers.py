"""Background responses on the web side (docs/api/background.md).

``POST /v1/responses`` with ``background: true`` is checked as any request
(the model, what it continues, its input, its caller's limits:
``admission.check``), then stored at once with the
status ``queued``, its first two events (``response.created``,
``response.queued``) written to its event log, and handed to a worker
(``background_run``); the request answers the queued response, or with
``stream: true`` follows its events as they come. Its usage row is
written when the work ends, by the worker: one row, with this request's id
(by the cancel when it was cancelled while queued, and by whoever finds
its worker lost).

``GET /v1/responses/{id}?stream=true&starting_after=N`` replays the events
after ``N`` and follows the rest, from any web process;
``POST /v1/responses/{id}/cancel`` cancels. Each read of a response still
running checks that its worker lives (``background_run.reap``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.conf import settings

from responses_api.api.endpoints import retrieve_response
from responses_api.backends.routing import no_backend
from responses_api.background import run as background_run
from responses_api.background.job import Job, job_dump
from responses_api.pipeline.admission import check
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.create import (
    affinity_for,
    create_response,
    model_for,
    new_translator,
)
from responses_api.pipeline.parse import parse_request
from responses_api.pipeline.responder import Responder
from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError, invalid
from responses_api.store import continuation, conversation_turns, events, leases
from responses_api.store import responses as store
from responses_api.store.background import background_insert, background_update
from responses_api.store.seal import cache_salt, reasoning_seal
from responses_api.translate.items import new_id
from responses_api.translate.request import prepare_chat
from responses_api.usage.ratelimit import estimate_tokens

# How long a follower waits for new events before it checks the worker lives.
FOLLOW_WAIT = 2.0
# How long a cancel waits for the worker to end the response.
CANCEL_WAIT = 5.0
TERMINAL = ("completed", "failed", "incomplete", "cancelled")
# A cursor as a client writes a sequence_number: ASCII digits, maybe a minus,
# and no more digits than a 64-bit number has. ``int()`` alone would also
# take "+5", " 5", "1_0" and other scripts' digits.
_CURSOR = re.compile(r"-?[0-9]{1,19}", re.ASCII)


async def create(call: Call) -> Reply | None:
    """``POST /v1/responses``: queued when ``background`` is true, else relayed."""
    request = parse_request(call.body, call.headers)
    if not request.background:
        return await create_response(call, request)
    return await _queue(call, request)


async def _queue(call: Call, request: CreateResponse) -> Reply | None:
    exchange = call.exchange
    caller = exchange.caller
    assert caller is not None
    exchange.asked(
        model=request.model, stream=bool(request.stream), prompt_cache_key=request.prompt_cache_key
    )
    if caller.retention_policy != "store":
        raise invalid(
            "background responses are not available: this organisation stores nothing (zero "
            "data retention), and a background response is stored while it runs so that it "
            "can be retrieved. Send the request without background.",
            param="background",
        )
    if request.store is False:
        raise invalid(
            "background requires store: a background response is stored so that it can be "
            "retrieved. Leave store out or set it to true.",
            param="store",
        )
    model = await model_for(caller, request.model)
    exchange.served_by(model)
    if not model.routes:
        raise no_backend(model, "it has no enabled backend")
    if request.conversation:
        # The 404 of an unknown (or another organisation's) conversation is
        # the POST's, as without background, not a failure on the worker.
        await conversation_turns.join(caller, request)
    prepared = await continuation.prepare(caller, request)
    response_id = new_id("resp")
    exchange.responding(response_id, background=True)
    draft = prepare_chat(
        prepared.request,
        limits=model.limits,
        seal=reasoning_seal(caller.organisation_id),
        cache_salt=cache_salt(caller.organisation_id),
    )
    # Over a limit, the POST is the 429; the worker's run holds the spend.
    await check(exchange=exchange, estimate=estimate_tokens(call.body), draft=draft)
    first = model.routes[0]
    plan = draft.for_route(
        upstream_model=first.upstream_name,
        dialect=first.backend.dialect,
        extra_body=first.backend.extra_body,
    )
    translator = new_translator(request, plan, True, response_id, quiet=False)
    snapshot = translator.response("queued", with_usage=False)
    affinity = affinity_for(caller, model, prepared.request, prepared.previous, response_id)
    keep = continuation.Keep(
        organisation_id=caller.organisation_id,
        ttl_hours=caller.store_ttl_hours,
        body=call.body,
        instructions=prepared.request.instructions,
        previous=prepared.previous,
        references=prepared.references,
        affinity=affinity or "",
    )
    job = job_dump(call, snapshot)
    await background_insert(keep, snapshot, job)
    organisation_id = caller.organisation_id
    await events.job_put(organisation_id, response_id, job)
    opening = EventWriter().encoded(
        [{"type": kind, "response": snapshot} for kind in ("response.created", "response.queued")]
    )
    await events.append(organisation_id, response_id, 0, opening)
    try:
        await background_run.dispatch(organisation_id, response_id)
    except Exception:
        # No worker will ever take it: it ends here, and so does the request.
        failed = {
            **snapshot,
            "status": "failed",
            "error": {"code": "server_error", "message": "The response could not be queued."},
        }
        await sync_to_async(background_update)(
            organisation_id=organisation_id, response_id=response_id, response=failed
        )
        await leases.transition(organisation_id, response_id, "queued", "failed")
        event = EventWriter(len(opening)).encoded([{"type": "response.failed", "response": failed}])
        await events.append(organisation_id, response_id, len(opening), event, end=True)
        raise
    # The worker writes this request's row when the work ends.
    exchange.row_left_to_worker()
    if not exchange.asking.stream:
        return Reply(snapshot)
    await _follow(call.responder, organisation_id, response_id, -1)
    return None


# --- reading a background response ----------------------------------------------------


def _query(call: Call) -> dict[str, str]:
    # Blank values kept: ``starting_after=`` is a cursor that is not a number.
    query = parse_qs(call.query_string.decode("latin-1"), keep_blank_values=True)
    return {k: v[-1] for k, v in query.items()}


def _not_found(response_id: str) -> ApiError:
    # As ``endpoints``: nothing tells an unknown id from another organisation's.
    return ApiError(
        404, f"No response with id '{response_id}' was found.", code="response_not_found"
    )


async def _stored(call: Call) -> tuple[int, dict[str, Any]]:
    """The caller's stored response named in the path: the organisation and
    the response, reaped first when its worker died."""
    caller = call.exchange.caller
    assert caller is not None
    response_id = call.params["response_id"]
    if caller.retention_policy != "store":
        raise ApiError(
            404,
            "Responses are not stored for this organisation (zero data retention), "
            "so there is nothing to retrieve or cancel.",
            code="response_not_found",
        )
    organisation_id = caller.organisation_id
    stored = await sync_to_async(store.response_get)(
        organisation_id=organisation_id, response_id=response_id
    )
    if stored is None:
        raise _not_found(response_id)
    response = stored.response
    if (
        response.get("background")
        and response.get("status") in events.ACTIVE
        and await background_run.reap(organisation_id, response_id, response)
    ):
        return await _stored(call)
    return organisation_id, response


async def retrieve(call: Call) -> Reply | None:
    """``GET /v1/responses/{id}``, with ``stream`` and ``starting_after``."""
    query = _query(call)
    if query.get("stream", "").lower() not in ("true", "1"):
        if call.exchange.caller is not None and call.exchange.caller.retention_policy == "store":
            await _stored(call)  # a response whose worker died is failed first
        return await retrieve_response(call)
    after_text = query.get("starting_after", "-1")
    if not _CURSOR.fullmatch(after_text):
        raise invalid("starting_after must be an integer.", param="starting_after")
    after = int(after_text)
    organisation_id, response = await _stored(call)
    if not response.get("background"):
        raise invalid(
            "Only background responses can be streamed again: this response was created "
            "without background. GET it without stream for the response as JSON.",
            param="stream",
        )
    call.exchange.asked(model=response.get("model", ""), stream=True, prompt_cache_key=None)
    last = await events.next_number(organisation_id, response["id"]) - 1
    if not -1 <= after <= last:
        raise invalid(
            f"starting_after must be from -1 (before the first event) to {last}, the "
            "sequence_number of the last event so far.",
            param="starting_after",
        )
    await _follow(call.responder, organisation_id, response["id"], after)
    return None


async def _follow(responder: Responder, organisation_id: int, response_id: str, after: int) -> None:
    """Write the events after ``after``, then each new one, until the log
    ends. Whenever none came for ``FOLLOW_WAIT``, look at the response:
    its worker may have died (it is reaped), or its log expired. A follower
    stops after ``SWITCHYARD_BACKGROUND_FOLLOW_SECONDS`` whatever the run
    does: its client resumes from the last event it got."""
    await responder.start_stream()
    settled = False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.SWITCHYARD_BACKGROUND_FOLLOW_SECONDS
    while (left := deadline - loop.time()) > 0:
        read = await events.read(organisation_id, response_id, after, wait=min(FOLLOW_WAIT, left))
        # Only numbers past the cursor: each event goes out once, in order,
        # and every turn moves the cursor on or waits.
        fresh = [(number, event) for number, event in read.events if number > after]
        if fresh:
            after = max(number for number, _ in fresh)
            await responder.chunk(b"".join(event for _, event in fresh))
            continue
        if read.ended or settled:
            break
        stored = await sync_to_async(store.response_get)(
            organisation_id=organisation_id, response_id=response_id
        )
        if stored is None or stored.response.get("status") not in events.ACTIVE:
            settled = True  # one more read: its last events may be on their way
        else:
            await background_run.reap(organisation_id, response_id, stored.response)
    await responder.end_stream(b"")


async def cancel(call: Call) -> Reply:
    """``POST /v1/responses/{id}/cancel``: the response, cancelled."""
    organisation_id, response = await _stored(call)
    response_id = response["id"]
    if not response.get("background"):
        raise invalid("Only responses created with background can be cancelled.")
    status = response.get("status")
    if status == "cancelled":
        return Reply(response)
    if status in TERMINAL:
        raise invalid(f"Cannot cancel a response whose status is '{status}'.")
    call.exchange.asked(model=response.get("model", ""), stream=False, prompt_cache_key=None)
    await events.cancel_request(organisation_id, response_id)
    if await leases.transition(organisation_id, response_id, "queued", "cancelled"):
        # Not started: ended here, with the create request's row (a worker
        # that takes it later skips it).
        cancelled = {**response, "status": "cancelled"}
        await sync_to_async(background_update)(
            organisation_id=organisation_id, response_id=response_id, response=cancelled
        )
        data = await events.job_get(organisation_id, response_id)
        if data is not None:
            await background_run.cancelled_row(Job.load(data))
        number = await events.next_number(organisation_id, response_id)
        await events.append(organisation_id, response_id, number, [], end=True)
        return Reply(cancelled)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CANCEL_WAIT
    while loop.time() < deadline:
        if await events.state(organisation_id, response_id) not in events.ACTIVE:
            break
        await asyncio.sleep(background_run.CANCEL_POLL / 2)
    organisation_id, response = await _stored(call)
    return Reply(response)
