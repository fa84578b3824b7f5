"""Running a background response, wherever it runs (docs/api/background.md).

A worker (a Celery task, or in the embedded default a thread of the web
process) runs the queued request through the same runner and handler as
any ``POST /v1/responses`` (``pipeline/runner.py``, ``create.create_response``),
streamed, with a :class:`LogResponder` in place of the client's connection:
each event goes to the response's event log (``store.events``) as it is
made, under the numbers that follow the two the create request wrote
(``response.created`` and ``response.queued``). The ending is the usual one
(``ending.end_exchange``): it stores the final response and hands over the
usage row, which is the create request's own row (its request id),
finished here with what the work produced.

While it runs, a watch polls the cancel flag every ``CANCEL_POLL`` seconds
(a cancel cancels the run, which aborts the backend request at once) and
renews the worker's lease. A worker that dies stops renewing it; whoever
looks next (a read of the response, a cancel, the ``reap_background_responses``
beat task) ends the response as ``failed`` and writes its row (:func:`reap`).
Every write of the run carries the fencing token it took the response
with (``store.leases``): a worker that was only paused past its lease finds
its writes refused once it was reaped, and stops.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings

from responses_api.background.job import Job, LogResponder
from responses_api.background.local import LocalWorker
from responses_api.pipeline.call import Call
from responses_api.pipeline.create import Mode, create_response
from responses_api.pipeline.draining import drain, shutting_down
from responses_api.pipeline.parse import parse_request
from responses_api.pipeline.runner import run as run_request
from responses_api.pipeline.tracing import run_begin
from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.errors import ApiError
from responses_api.runtime import telemetry
from responses_api.store import events, leases
from responses_api.store.background import FENCE, background_job, background_update

log = logging.getLogger(__name__)
T = TypeVar("T")

CANCEL_POLL = 0.2
WORKER_LOST = (
    "The worker running this background response stopped before it finished "
    "(it was restarted or killed). Create the response again."
)
CANCELLED = "Cancelled (POST /v1/responses/{id}/cancel)"


# --- the run --------------------------------------------------------------------------


async def run(organisation_id: int, response_id: str, stop: threading.Event | None = None) -> None:
    """Run the queued response (the Celery task's and the local thread's
    work); ``stop``, once set, ends it as the shutdown deadline ends a
    request (the local thread's at SIGTERM)."""
    data = await events.job_get(organisation_id, response_id)
    if data is None:
        log.warning("background response %s: its job is gone", response_id)
        return
    job = Job.load(data)
    lease = settings.SWITCHYARD_BACKGROUND_LEASE_SECONDS
    fence = await leases.claim(organisation_id, response_id, lease)
    if fence is None:
        # Cancelled while queued: the cancel ended it and wrote its row.
        return
    exchange = job.exchange(holds=functools.partial(leases.holds, *job.key, fence))
    responder = LogResponder(exchange, organisation_id, response_id, fence)
    headers = {b"content-type": b"application/json"}
    if job.pinned:
        headers[b"x-backend-id"] = job.pinned.encode("latin-1")
    call = Call(exchange, responder, headers, body=job.body)
    FENCE.set(fence)  # the stored response's final write, deep in the ending
    begin = functools.partial(run_begin, context=job.trace)
    handler = functools.partial(_create, response_id=response_id)
    work = asyncio.ensure_future(run_request(call, handler, begin=begin, tracked=False))
    cancelled = lost = False
    renewed = time.monotonic()
    try:
        while not work.done():
            await asyncio.wait([work], timeout=CANCEL_POLL)
            if work.done():
                break
            if not cancelled and await events.cancel_requested(organisation_id, response_id):
                cancelled = True
                exchange.client_gone(note=CANCELLED)
                work.cancel()
            if stop is not None and stop.is_set() and not exchange.shutdown:
                exchange.shutdown_deadline()
                work.cancel()
            if time.monotonic() - renewed > lease / 3:
                renewed = time.monotonic()
                lost = not await leases.lease_renew(organisation_id, response_id, lease, fence)
            if (lost or responder.lost) and not work.done():
                # Reaped while paused: whatever it writes now is refused.
                log.warning("background response %s: taken from this worker", response_id)
                lost = True
                work.cancel()
        await asyncio.wait([work])
        if not (lost or responder.lost):
            await _ended(call, responder, job, cancelled=cancelled or work.cancelled())
    finally:
        await exchange.drop_hold()
        if not (lost or responder.lost):
            await leases.lease_drop(organisation_id, response_id)


async def _create(call: Call, *, response_id: str) -> None:
    """The handler of ``POST /v1/responses`` for the queued response."""
    request = parse_request(call.body, call.headers)
    await create_response(call, request, mode=Mode(background=response_id))


async def _ended(call: Call, responder: LogResponder, job: Job, *, cancelled: bool) -> None:
    """After the ending: a stream that ended has its final response stored
    and its log closed already; otherwise this ends both."""
    organisation_id, response_id = job.key
    fence, number = responder.fence, responder.log.sequence
    if responder.ended:
        await leases.transition(organisation_id, response_id, "in_progress", "done", fence=fence)
        return
    output = call.output
    if cancelled:
        if output is not None:
            output.translator.close_items("incomplete")
            final = output.translator.response("cancelled", extras=call.exchange.extras())
        else:
            final = {**(responder.log.last or job.snapshot), "status": "cancelled"}
        await sync_to_async(background_update)(
            organisation_id=organisation_id, response_id=response_id, response=final, fence=fence
        )
        await leases.transition(
            organisation_id, response_id, "in_progress", "cancelled", fence=fence
        )
        await events.append(organisation_id, response_id, number, [], end=True, fence=fence)
        return
    error = _answer_error(responder.answer)
    final = {**(responder.log.last or job.snapshot), "status": "failed", "error": error}
    await sync_to_async(background_update)(
        organisation_id=organisation_id, response_id=response_id, response=final, fence=fence
    )
    await leases.transition(organisation_id, response_id, "in_progress", "failed", fence=fence)
    failed = EventWriter(number).encoded([{"type": "response.failed", "response": final}])
    await events.append(organisation_id, response_id, number, failed, end=True, fence=fence)


def _answer_error(answer: bytes) -> dict[str, Any]:
    try:
        error = orjson.loads(answer)["error"]
        return {"code": error.get("code") or error.get("type"), "message": error["message"]}
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return {"code": "server_error", "message": "The response ended without an answer."}


# --- a worker that died ----------------------------------------------------------------


async def reap(organisation_id: int, response_id: str, response: dict[str, Any]) -> bool:
    """End ``response`` (as stored, still queued or in progress) as failed
    when nothing runs it any more: its worker's lease ran out, or nothing
    of it is kept (the embedded default's process restarted). True when
    it did."""
    if response.get("status") not in events.ACTIVE:
        return False
    state = await events.state(organisation_id, response_id)
    fence: int | None = None  # nothing kept of it: no worker to fence out
    if state == "in_progress":
        if await leases.lease_alive(organisation_id, response_id):
            return False
        # The next token: the worker's writes are refused from now on.
        fence = await leases.seize(organisation_id, response_id, "in_progress", "failed")
        if fence is None:
            return False
    elif state is not None:
        return False  # queued: a worker takes it when one is free
    lost = ApiError(500, WORKER_LOST, code="worker_lost")
    await _fail(organisation_id, response_id, response, fence, lost, kept=state is not None)
    await leases.lease_drop(organisation_id, response_id)
    return True


async def shut_out(organisation_id: int, response_id: str) -> None:
    """A response still queued at the shutdown deadline of the process
    that was to run it: failed, with its row (a 503, as a request cut then)."""
    fence = await leases.seize(organisation_id, response_id, "queued", "failed")
    if fence is None:
        return  # cancelled meanwhile: the cancel ended it
    data = await events.job_get(organisation_id, response_id)
    snapshot = Job.load(data).snapshot if data is not None else {"id": response_id}
    await _fail(organisation_id, response_id, snapshot, fence, shutting_down(), kept=True)


async def _fail(
    organisation_id: int,
    response_id: str,
    response: dict[str, Any],
    fence: int | None,
    error: ApiError,
    *,
    kept: bool,
) -> None:
    """End ``response`` failed with ``error`` where no run will: stored,
    its log closed (when ``kept``), the create request's row written."""
    data = await events.job_get(organisation_id, response_id) if kept else None
    if data is None:
        # Nothing kept of it but its stored row (a restart of the embedded
        # default): the job sealed there still names the request's row.
        data = await sync_to_async(background_job)(
            organisation_id=organisation_id, response_id=response_id
        )
    failed = {
        **response,
        "status": "failed",
        "error": {"code": "server_error", "message": error.message},
    }
    await sync_to_async(background_update)(
        organisation_id=organisation_id, response_id=response_id, response=failed, fence=fence
    )
    if kept:
        number = await events.next_number(organisation_id, response_id)
        event = EventWriter(number).encoded([{"type": "response.failed", "response": failed}])
        await events.append(organisation_id, response_id, number, event, end=True, fence=fence)
    if data is not None:
        exchange = Job.load(data).exchange()
        exchange.asked(model=response.get("model", ""), stream=False, prompt_cache_key=None)
        exchange.fail(error)
        if error.code == "server_shutting_down":
            exchange.cut_by_shutdown()
        await exchange.submit()


async def cancelled_row(job: Job) -> None:
    """The create request's row (a 499) of a response cancelled while queued."""
    exchange = job.exchange()
    exchange.asked(model=job.snapshot.get("model", ""), stream=False, prompt_cache_key=None)
    exchange.client_gone(note=CANCELLED)
    await exchange.submit()


async def reap_expired() -> int:
    """The beat's sweep: every response whose worker's lease ran out."""
    from responses_api.store import responses as store

    reaped = 0
    for organisation_id, response_id in await leases.leases_expired():
        stored = await sync_to_async(store.response_get)(
            organisation_id=organisation_id, response_id=response_id
        )
        if stored is None or stored.response.get("status") not in events.ACTIVE:
            await leases.lease_drop(organisation_id, response_id)
            continue
        reaped += await reap(organisation_id, response_id, stored.response)
    return reaped


# --- where it runs ----------------------------------------------------------------------


def runner() -> str:
    """``SWITCHYARD_BACKGROUND_RUNNER``; unset: a Celery worker when Celery
    has a broker of its own (Redis, not eager), else this process."""
    if settings.SWITCHYARD_BACKGROUND_RUNNER:
        return str(settings.SWITCHYARD_BACKGROUND_RUNNER)
    return "celery" if settings.REDIS_URL and not settings.CELERY_TASK_ALWAYS_EAGER else "local"


async def dispatch(organisation_id: int, response_id: str) -> None:
    """Hand the queued response to a worker."""
    if runner() == "local":
        local_worker.submit(organisation_id, response_id)
        return
    await asyncio.to_thread(
        _celery().send_task,
        "responses_api.tasks.run_background_response",
        args=[organisation_id, response_id],
    )


@functools.cache
def _celery() -> Any:
    """A Celery app that only sends tasks, made at the first one: a web
    process that queues no background response never loads Celery."""
    from celery import Celery

    app = Celery("switchyard")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    return app


async def _close_loop() -> None:
    """Close what this event loop opened: backend connections, Redis."""
    from responses_api.backends.client import close_clients
    from responses_api.runtime import redis_conn

    await close_clients()
    await redis_conn.close_loop_clients()


local_worker = LocalWorker(run, shut_out, _close_loop)
drain.workers.append(local_worker)  # SIGTERM drains it with the exchanges


def run_to_end(organisation_id: int, response_id: str) -> None:
    """A Celery worker's run, in an event loop of its own that closes
    what it opened; traced as the web processes are (set up at its first run,
    in the process that runs it)."""
    telemetry.install()
    _run_closing(run(organisation_id, response_id))


def sweep() -> int:
    """The beat task's sweep (:func:`reap_expired`), in a loop of its own."""
    return _run_closing(reap_expired())


def _run_closing(work: Coroutine[Any, Any, T]) -> T:
    async def main() -> T:
        try:
            return await work
        finally:
            await _close_loop()

    return asyncio.run(main())
