"""OpenTelemetry traces of API requests (docs/operations/traces.md).

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``…_TRACES_ENDPOINT``) is
set. Off, :data:`tracer` stays None, the SDK's tracing and the exporter
are never imported, and a request pays for three checks of that None: no
span, no header, the bytes sent to a backend unchanged.

On, a request's spans come from two sources, chosen by whether anything
must know a span's id while the request runs:

- **Live**: the request's own span (SERVER), started once the caller is
  authenticated and back-dated to the request's first byte, and one CLIENT
  span per backend call, whose id goes to the backend in ``traceparent``.
- **Recorded**: the queue wait, the backend connect and the first token are
  intervals the request path measures anyway (``Timing``, the answer's
  connection, the translator's first token). They become spans with explicit
  start and end times once known, so the hot path gains no context switch,
  no ``with`` block and no span object per step.

A request span is only made for an authenticated request: one that is
refused before belongs to no organisation, leaves no usage row and is
counted by a metric instead; an anonymous client cannot fill the trace
store. Spans go to the collector through a ``BatchSpanProcessor`` (its own
thread), with the OTLP/HTTP exporter configured by the SDK's own
``OTEL_EXPORTER_OTLP_*`` and ``OTEL_BSP_*`` variables; sampling follows
``OTEL_TRACES_SAMPLER`` (by default the parent's decision, else always).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Mapping
from contextvars import ContextVar
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from multidict import CIMultiDict

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("switchyard.telemetry")

SERVICE_NAME = "switchyard"

# The process's tracer: None while tracing is off.
tracer: Tracer | None = None
_provider: TracerProvider | None = None

# The trace of the request the running task serves (each ASGI request runs
# in a task of its own, so the backend client finds it without being told).
current: ContextVar[RequestTrace | None] = ContextVar("switchyard_trace", default=None)


class Timing(Protocol):
    """What a trace reads of the request's ``Exchange.timing``."""

    @property
    def started(self) -> float: ...
    @property
    def created_at(self) -> float: ...
    @property
    def queue_wait_ms(self) -> float | None: ...


class RunTiming:
    """A background run's clocks for its spans. Its exchange keeps the
    create request's ``created_at`` (the usage row's), but the run started
    later, in a worker, when its ``timing.started`` was read."""

    __slots__ = ("created_at", "started", "timing")

    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.started = timing.started
        self.created_at = time.time() - (time.perf_counter() - timing.started)

    @property
    def queue_wait_ms(self) -> float | None:
        return self.timing.queue_wait_ms


def install() -> bool:
    """Set tracing up for this process when the settings turn it on; True if on."""
    global tracer, _provider
    if tracer is not None or not settings.SWITCHYARD_TRACES:
        return tracer is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    # Flushed at exit by the SDK, and on SIGTERM by draining (shutdown below).
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _provider = provider
    tracer = provider.get_tracer("switchyard")
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    log.info("traces are exported to %s", endpoint)
    return True


def flush(timeout_ms: int = 10_000) -> bool:
    """Export the spans ended so far; True when they all went."""
    return _provider.force_flush(timeout_ms) if _provider is not None else True


def shutdown() -> None:
    """Export what is left and stop tracing (a process's end; tests)."""
    global tracer, _provider
    provider, _provider, tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def epoch_ns(timing: Timing, at: float) -> int:
    """A ``perf_counter`` reading as the wall-clock time a span needs."""
    return int((timing.created_at + (at - timing.started)) * 1e9)


class _HeaderGetter:
    """Reads ``traceparent``/``tracestate`` from the ASGI headers (bytes)."""

    def get(self, carrier: Mapping[bytes, bytes], key: str) -> list[str] | None:
        value = carrier.get(key.encode())
        return [value.decode("latin-1")] if value is not None else None

    def keys(self, carrier: Mapping[bytes, bytes]) -> list[str]:
        return [k.decode("latin-1") for k in carrier]


@functools.cache
def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


class BackendCall:
    """One chat request sent to a backend: its CLIENT span, and when its
    connection was had (aiohttp's tracing hooks, :func:`aiohttp_trace_config`)."""

    __slots__ = ("connected", "context", "reused", "span", "started", "trace")

    def __init__(self, trace: RequestTrace, span: Span, context: Context) -> None:
        self.trace = trace
        self.span = span
        self.context = context
        self.started = time.perf_counter()
        self.connected: float | None = None
        self.reused = False

    def headers(self, base: CIMultiDict[str]) -> CIMultiDict[str]:
        """``base`` (the backend's prepared headers) with this call's trace context."""
        carrier: dict[str, str] = {}
        _propagator().inject(carrier, context=self.context)
        headers = base.copy()
        headers.update(carrier)
        return headers

    def answered(self, status: int) -> None:
        self.span.set_attribute("http.response.status_code", status)
        if status >= 400:
            self.span.set_attribute("error.type", str(status))

    def failed(self, error: BaseException) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("error.type", type(error).__name__)
        self.span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
        self.end()

    def end(self) -> None:
        """The answer is closed: the call's span ends, with its connect span."""
        span = self.span
        if not span.is_recording():
            return
        timing = self.trace.timing
        if self.connected is not None and tracer is not None:
            connect = tracer.start_span(
                "backend connect",
                context=self.context,
                start_time=epoch_ns(timing, self.started),
                attributes={"switchyard.connection.reused": self.reused},
            )
            connect.end(epoch_ns(timing, self.connected))
        span.end()


class RequestTrace:
    """The spans of one request: its own and those of its backend calls."""

    __slots__ = ("calls", "context", "queued", "span", "timing", "waited_ms")

    def __init__(self, span: Span, context: Context, timing: Timing) -> None:
        self.span = span
        self.context = context
        self.timing = timing
        self.calls: list[BackendCall] = []
        # The queue wait already shown as spans.
        self.waited_ms = 0.0
        self.queued = False

    def backend_call(self, host: str, port: int | None, model: str) -> BackendCall:
        """A backend call starts: the queue wait before it becomes a span."""
        assert tracer is not None
        self.queue_span(time.perf_counter())
        span = tracer.start_span(
            f"chat {model}",
            context=self.context,
            kind=_kind("CLIENT"),
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "http.request.method": "POST",
                "server.address": host,
                "server.port": port or 0,
            },
        )
        call = BackendCall(self, span, _with_span(span))
        self.calls.append(call)
        return call

    def queue_span(self, until: float) -> None:
        """The queue wait recorded since the last one, ending at ``until``:
        a request that asked for a backend slot has at least one, if only
        of a few microseconds."""
        total = self.timing.queue_wait_ms
        if total is None or tracer is None or not self.span.is_recording():
            return
        waited = total - self.waited_ms
        if waited <= 0 and self.queued:
            return
        self.waited_ms, self.queued = total, True
        timing = self.timing
        span = tracer.start_span(
            "queue wait",
            context=self.context,
            start_time=epoch_ns(timing, until - waited / 1000),
            attributes={"switchyard.queue_wait_ms": round(waited, 3)},
        )
        span.end(epoch_ns(timing, until))


def begin(
    headers: Mapping[bytes, bytes], timing: Timing, attributes: dict[str, Any], kind: str = "SERVER"
) -> None:
    """Start the request's span, a child of the client's ``traceparent``
    when it sent a valid one, and make it the running task's trace."""
    if tracer is None:
        return
    parent = _propagator().extract(headers, getter=_HeaderGetter())
    span = tracer.start_span(
        "request",
        context=parent,
        kind=_kind(kind),
        attributes=attributes,
        start_time=epoch_ns(timing, timing.started),
    )
    current.set(RequestTrace(span, _with_span(span), timing))


def carrier() -> dict[str, str]:
    """The running request's trace context as W3C headers (``traceparent``,
    ``tracestate``), for work it leaves to another process; empty untraced."""
    trace = current.get() if tracer is not None else None
    if trace is None:
        return {}
    headers: dict[str, str] = {}
    _propagator().inject(headers, context=trace.context)
    return headers


def _with_span(span: Span) -> Context:
    from opentelemetry.trace import set_span_in_context

    return set_span_in_context(span)


def _kind(name: str) -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind[name]


def aiohttp_trace_config() -> Any:
    """aiohttp's hooks that time a traced backend call's connection; None
    while tracing is off (the session then has no hooks at all)."""
    if tracer is None:
        return None
    import aiohttp

    config = aiohttp.TraceConfig()
    config.on_connection_create_end.append(_connected)
    config.on_connection_reuseconn.append(_reused)
    return config


async def _connected(session: Any, context: SimpleNamespace, params: Any) -> None:
    call = context.trace_request_ctx
    if isinstance(call, BackendCall):
        call.connected = time.perf_counter()


async def _reused(session: Any, context: SimpleNamespace, params: Any) -> None:
    call = context.trace_request_ctx
    if isinstance(call, BackendCall):
        call.connected = time.perf_counter()
        call.reused = True
