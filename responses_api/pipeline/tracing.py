"""A request's trace, from what its exchange recorded (docs/operations/traces.md;
``runtime/telemetry.py`` says how spans are made).

The request span follows the OpenTelemetry GenAI semantic conventions
(https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/): the
Responses API is a ``chat`` operation, so a ``POST /v1/responses`` span is
named ``chat {model}``; any other request, by the HTTP conventions, its
method. A WebSocket turn is such a request (a SERVER span under the
upgrade request's trace context); a background run, the work its create
request queued (a CONSUMER span under that request's span, whose context
the job keeps). Nothing a client wrote (prompt, answer) and no secret goes
on a span: ids, the model, token counts, timings and the outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from responses_api.pipeline.call import Call, Output
from responses_api.pipeline.exchange import Exchange
from responses_api.runtime import telemetry

log = logging.getLogger("switchyard.telemetry")

# ``gen_ai.provider.name`` as this server identifies itself: the backend
# behind a request varies (its name is ``switchyard.backend.name``), and none
# of the conventions' well-known providers is what answered.
PROVIDER = "switchyard"


def trace_begin(exchange: Exchange, headers: Mapping[bytes, bytes]) -> None:
    """The request is authenticated: its span starts (back-dated to its
    first byte), a child of the client's ``traceparent`` if any."""
    attributes = _identity(exchange)
    attributes["http.request.method"] = exchange.method
    attributes["url.path"] = exchange.endpoint[:200]
    telemetry.begin(headers, exchange.timing, attributes)


def turn_begin(exchange: Exchange, headers: Mapping[bytes, bytes]) -> None:
    """A WebSocket turn is admitted: its span starts, a SERVER span as an
    HTTP request's, a child of the upgrade request's ``traceparent`` if any.
    No ``http.request.method``: the turn is a frame, not an HTTP request."""
    if telemetry.tracer is None:
        return
    attributes = _identity(exchange)
    attributes["url.path"] = exchange.endpoint[:200]
    attributes["switchyard.transport"] = "websocket"
    telemetry.begin(headers, exchange.timing, attributes)


def run_begin(exchange: Exchange, context: Mapping[str, str]) -> None:
    """A background run starts in its worker: a CONSUMER span (it takes
    work a request queued), a child of the create request's span, whose
    trace context the job kept (``telemetry.carrier``)."""
    if telemetry.tracer is None:
        return
    attributes = _identity(exchange)
    attributes["switchyard.transport"] = "background"
    headers = {k.encode("latin-1"): v.encode("latin-1") for k, v in context.items()}
    telemetry.begin(headers, telemetry.RunTiming(exchange.timing), attributes, kind="CONSUMER")


def trace_finish(call: Call) -> None:
    """A turn or run has ended: its span too, if it has one."""
    if telemetry.tracer is not None and (trace := telemetry.current.get()) is not None:
        trace_end(call, trace)


def _identity(exchange: Exchange) -> dict[str, Any]:
    caller = exchange.caller
    assert caller is not None
    return {
        "switchyard.request_id": exchange.request_id,
        "switchyard.organisation_id": str(caller.organisation_id),
        "switchyard.api_key_id": str(caller.key_id),
    }


def trace_end(call: Call, trace: telemetry.RequestTrace) -> None:
    """The response is complete: the request's attributes and recorded
    spans, then its span's end. Never raises (the consumer must not)."""
    telemetry.current.set(None)
    try:
        if trace.span.is_recording():
            _record(call, trace)
        for backend_call in trace.calls:
            # A call cut before its answer (the client left while it connected).
            if backend_call.span.is_recording():
                backend_call.end()
    except Exception:
        log.exception("the trace of request %s could not be recorded", call.exchange.request_id)
    finally:
        trace.span.end()


def _record(call: Call, trace: telemetry.RequestTrace) -> None:
    from opentelemetry.trace import Status, StatusCode

    exchange, output, span = call.exchange, call.output, trace.span
    # A wait after the last backend call (no backend left to fail over to).
    trace.queue_span(time.perf_counter())
    attributes = _outcome(exchange)
    if exchange.asking.model:
        span.update_name(f"chat {exchange.asking.model}")
        attributes.update(_chat(exchange, output))
    else:
        span.update_name(exchange.method)
    span.set_attributes(attributes)  # at once: the SDK takes a lock per call
    outcome = exchange.outcome
    if outcome.status >= 500:
        # A server span's error is the server's (HTTP conventions): a 4xx is the client's.
        span.set_status(Status(StatusCode.ERROR, outcome.error_code or str(outcome.status)))
    first = output.translator.first_token_at if output is not None else None
    if first is not None and trace.calls and telemetry.tracer is not None:
        last = trace.calls[-1]
        token = telemetry.tracer.start_span(
            "first token",
            context=last.context,
            start_time=telemetry.epoch_ns(trace.timing, last.started),
        )
        token.end(telemetry.epoch_ns(trace.timing, max(first, last.started)))


def _outcome(exchange: Exchange) -> dict[str, Any]:
    """What every request's span says: its status, where it ran, how long it waited."""
    outcome, timing, backend = exchange.outcome, exchange.timing, exchange.backend
    attributes: dict[str, Any] = {"http.response.status_code": outcome.status}
    if backend is not None:
        attributes["switchyard.backend.id"] = str(backend.id)
        attributes["switchyard.backend.name"] = backend.name
        attributes["switchyard.attempts"] = exchange.attempts
    if timing.queue_wait_ms is not None:
        attributes["switchyard.queue_wait_ms"] = round(timing.queue_wait_ms, 3)
    if timing.ttft_ms is not None:
        attributes["switchyard.ttft_ms"] = round(timing.ttft_ms, 3)
    if outcome.error_code:
        attributes["error.type"] = outcome.error_code
    return attributes


def _chat(exchange: Exchange, output: Output | None) -> dict[str, Any]:
    """A Responses request's GenAI attributes."""
    input_tokens, cached, produced, reasoning = exchange.tokens
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": exchange.asking.model,
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": produced,
        "gen_ai.usage.cache_read.input_tokens": cached,
        "switchyard.usage.reasoning_tokens": reasoning,
        "switchyard.stream": exchange.asking.stream,
    }
    if exchange.client.session_id:
        attributes["gen_ai.conversation.id"] = exchange.client.session_id
    if output is not None:
        translator = output.translator
        attributes.update(_request_options(output.plan.body))
        attributes["gen_ai.response.id"] = translator.response_id
        attributes["gen_ai.response.model"] = translator.upstream_model or exchange.asking.model
        if translator.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [translator.finish_reason]
    return attributes


def _request_options(body: dict[str, Any]) -> dict[str, Any]:
    """The sampling options sent to the backend, by their GenAI names."""
    options = {}
    for key, name in _OPTIONS:
        value = body.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            options[name] = value
    return options


_OPTIONS = (
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("max_completion_tokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
)
