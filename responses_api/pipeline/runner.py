"""The outer steps of every request's life, for every transport.

An HTTP request (``edge/http.py``), a WebSocket turn (``edge/websocket.py``)
and a background run (``background/run.py``) differ in how their request
arrives and in how its answer is written down (their responder and its
writer, ``pipeline/writers.py``); everything around the handler is here, in
this order:

1. before the key is looked at, a process that drains or that cannot
   record usage takes no new work (:func:`closed`);
2. the key is authenticated (:func:`caller_for`), its caller recorded;
3. :func:`run`: the trace begins (each transport's own kind of span), the
   request is tracked for draining, the handler runs and the one ending
   writes the row and what the client is owed (``ending.end_served``);
   a bug in the ending itself is salvaged (:func:`salvage`); whatever held
   slots and spend holds are left are given back, and the trace ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from responses_api.access.auth import Caller, authenticate, cached_caller
from responses_api.pipeline.call import Call, Handler
from responses_api.pipeline.draining import drain, shutting_down
from responses_api.pipeline.ending import end_served
from responses_api.pipeline.exchange import Exchange
from responses_api.pipeline.failures import server_error, usage_backlog
from responses_api.pipeline.tracing import trace_finish
from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.errors import ApiError
from responses_api.usage.sink import sink

log = logging.getLogger("switchyard.requests")

Begin = Callable[[Exchange], None]


def closed() -> ApiError | None:
    """Why this process takes no new request now, if it does not: it drains
    (the client retries elsewhere), or it holds as many unwritten usage rows
    as it may. Checked before authentication, so such a refusal makes no row."""
    if drain.draining:
        return shutting_down()
    if sink.full():
        return usage_backlog()
    return None


async def caller_for(key: str | None) -> Caller:
    """The caller behind ``key``, from the cache of keys seen lately when it
    is there; an ``ApiError`` (401) when the key is not valid."""
    return cached_caller(key) or await authenticate(key)


async def run(call: Call, handler: Handler, *, begin: Begin | None, tracked: bool = True) -> None:
    """Serve an authenticated ``call`` with ``handler``, from its trace's
    start (``begin``, None: untraced) to its row. Nothing but a cancellation
    leaves it: a client gone, the shutdown deadline or a cancelled
    background run ends with its row written, and the cancellation goes on."""
    exchange = call.exchange
    if begin is not None:
        begin(exchange)
    if tracked:
        task = asyncio.current_task()
        assert task is not None
        drain.track(task, exchange)
    try:
        await end_served(call, handler)
    except Exception as exc:  # a bug in the ending: the request still ends, with its row
        await salvage(call, exc)
    finally:
        if exchange.releases:
            await exchange.give_back_held()
        await exchange.drop_hold()
        trace_finish(call)


async def salvage(call: Call, exc: Exception) -> None:
    """End a request whose own ending failed (a bug): the row is handed
    over if it was not, and the response ends — an error if nothing was
    sent, else an ``error`` event closing the stream, numbered after its
    last event by the stream's own writer. Nothing raises out: an exception
    reaching the server after the response started would stop its
    housekeeping (daphne's 500 page cannot be sent any more)."""
    exchange, responder = call.exchange, call.responder
    log.error("request %s failed", exchange.request_id, exc_info=exc)
    error = server_error()
    try:
        if not exchange.submitted and exchange.caller is not None:
            if exchange.outcome.status != 499:
                exchange.fail(error, cause=f"{type(exc).__name__}: {exc}")
            await exchange.submit()
    except Exception:
        log.exception("request %s: its usage row could not be handed over", exchange.request_id)
    try:
        if not responder.started:
            await responder.error(error)
        elif not responder.finished:
            output = call.output
            writer = output.writer if output is not None and output.writer else EventWriter()
            await responder.end_stream(writer.encode([{**error.body()["error"], "type": "error"}]))
    except Exception:
        log.exception("request %s: its response could not be ended", exchange.request_id)
