"""The end of every API request, in one place.

Whatever happened — an answer, an error before or after a stream started,
a client gone (499), the process shutting down — the ending sets the
status, submits the usage row, and then writes what the client is owed: the
JSON answer, the error, or the stream's terminal event. The row is handed
over before the response's last byte (usage.py states that guarantee), and
exactly once (``Exchange.submit``). A response to be stored (``Output.keep``)
is written just before its JSON body or terminal event goes out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson

from responses_api.pipeline.call import Call, Output, Reply
from responses_api.pipeline.draining import shutting_down
from responses_api.pipeline.failures import failure
from responses_api.protocol.errors import ApiError

# The `error.code` a stream's `response.failed` may carry (docs/api/responses.md).
STREAM_FAILURE_CODES = frozenset({"server_error", "rate_limit_exceeded", "invalid_prompt"})
# Characters of output past which a stream's closing events go out one by one.
LONG_ANSWER = 64 * 1024


async def end_exchange(
    call: Call, *, error: ApiError | None = None, reply: Reply | None = None, detail: str = ""
) -> None:
    """End ``call`` with ``error``, or with ``reply`` / its output when None.
    ``detail`` is what the row records of an unexpected failure that the
    client sees only as a generic error."""
    exchange, responder, output = call.exchange, call.responder, call.output
    if output is not None:
        for code, message in output.translator.notices():
            exchange.notice(code, message)
        if error is None:
            _budget_notice(call, output)
    if exchange.outcome.status == 499:
        await exchange.submit()  # the client is gone: nothing to write
        return
    if error is not None:
        if error.code == "backend_error":
            # Support and the client see which backend broke the protocol.
            exchange.notice("backend_error", error.message)
        exchange.fail(error, cause=detail)
    else:
        exchange.answered(reply.status if reply is not None else 200)
    await exchange.submit()
    if responder.finished:
        return
    if responder.started:
        assert output is not None and output.writer is not None
        events = _terminal(call, output, error)
        if output.keep is not None:
            await output.keep.save(events[-1]["response"])
        if output.translator.output_cap.held > LONG_ANSWER:
            # Each closing event repeats the answer's text (the item's
            # ``.done`` events, then the response): encoded together they
            # would hold it four times over at once. One at a time, each
            # write waits for the one before to drain.
            for event in events[:-1]:
                await responder.chunk(output.writer.encode([event]))
            events = events[-1:]
        await responder.end_stream(output.writer.encode(events))
    elif error is not None:
        await responder.error(error)
    elif reply is not None and reply.stream is not None:
        await responder.raw_stream(
            reply.status,
            reply.stream,
            reply.media_type,
            length=reply.length,
            attachment=reply.attachment,
        )
    elif reply is not None:
        await responder.json(reply.status, orjson.dumps(reply.payload))
    else:
        assert output is not None
        await _answer(call, output)


def _terminal(call: Call, output: Output, error: ApiError | None) -> list[dict]:
    """A stream's last events: its items closed, then exactly one of
    ``response.completed``/``incomplete``/``failed``."""
    extras = call.exchange.extras()
    if error is None:
        return output.translator.finish(extras)
    code = error.code if error.code in STREAM_FAILURE_CODES else None
    if code is None:
        code = "rate_limit_exceeded" if error.status == 429 else "server_error"
    return output.translator.fail(code, error.message, extras)


async def _answer(call: Call, output: Output) -> None:
    """A non-streamed response, with its timing in ``Server-Timing``."""
    translator = output.translator
    translator.close_items()
    extras = call.exchange.extras()
    status, reason = translator.status
    body = translator.response(status, extras=extras, incomplete_reason=reason)
    if output.keep is not None:
        await output.keep.save(body)
    timing = extras["timing"]
    server_timing = (
        f"queue;dur={timing['queue_wait_ms'] or 0}, ttft;dur={timing['ttft_ms'] or 0}, "
        f"total;dur={timing['duration_ms']}"
    )
    headers = [
        (b"server-timing", server_timing.encode()),
        # The request's cost in the currency of the model prices.
        (b"x-switchyard-cost", f"{call.exchange.cost():f}".encode()),
    ]
    await call.responder.json(200, orjson.dumps(body), headers)


def _budget_notice(call: Call, output: Output) -> None:
    budget = output.plan.thinking_budget
    if budget is not None and output.translator.final_usage().reasoning_tokens >= budget > 0:
        call.exchange.notice(
            "thinking_budget_reached", f"Thinking stopped at the budget of {budget} tokens."
        )


async def end_served(call: Call, handler: Callable[[Call], Awaitable[Reply | None]]) -> None:
    """Run ``handler`` and end the exchange, whatever it did: an ``ApiError``
    is the answer; a cancellation is the client gone (its ending shielded,
    the cancellation going on) or the shutdown deadline (a 503); anything
    else a bug (500) or an outage (503), never a traceback out."""
    exchange = call.exchange
    error: ApiError | None = None
    reply: Reply | None = None
    detail = ""
    try:
        reply = await handler(call)
    except ApiError as raised:
        error = raised
    except asyncio.CancelledError:
        if call.cut_by is not None:
            error = call.cut_by  # nothing more reaches the client: the row says why
        elif not exchange.shutdown:
            exchange.client_gone()
            await asyncio.shield(end_exchange(call))
            raise
        else:
            # The process's shutdown deadline: end the response properly.
            error = shutting_down()
            exchange.cut_by_shutdown()
    except Exception as exc:
        error = failure(exchange.request_id, exc)
        detail = f"{type(exc).__name__}: {exc}"
    await end_exchange(call, error=error, reply=reply, detail=detail)
