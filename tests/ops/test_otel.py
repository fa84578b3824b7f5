"""OpenTelemetry traces: each request's spans reach an OTLP collector started
here, decoded from the protobuf the exporter sends, with the GenAI
attributes, the client's trace as parent and the backend called with the
same trace; with no endpoint configured there is no tracer and nothing is
forwarded."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    free_port,
    server_env,
    start_daphne,
    start_simulator,
    wait_for,
    wait_rows,
)
from tests.ops.otlp_collector import Collector, Span

pytestmark = pytest.mark.django_db


def traceparent() -> tuple[str, str, str]:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{parent_id}-01", trace_id, parent_id


@pytest.fixture
def collector():
    collector = Collector()
    yield collector
    collector.stop()


@pytest.fixture
def traced(collector, settings, monkeypatch):
    """This process traces to ``collector``, set up as a web process does it."""
    from responses_api.runtime import telemetry

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    settings.SWITCHYARD_TRACES = True
    assert telemetry.install()
    yield collector
    telemetry.shutdown()


@pytest.fixture
def untraced(settings, monkeypatch):
    from responses_api.runtime import telemetry

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    telemetry.shutdown()
    settings.SWITCHYARD_TRACES = False


@pytest.fixture
def tenant(provision, local_simulator):
    return provision("acme", local_simulator.url)


def exported(collector: Collector, trace_id: str, count: int) -> list[Span]:
    """The trace's spans, once ``count`` of them are exported."""
    from responses_api.runtime import telemetry

    telemetry.flush()
    return wait_for(lambda: len(s := collector.trace(trace_id)) >= count and s, timeout=10)


def by_kind(spans: list[Span]) -> tuple[Span, Span, dict[str, Span]]:
    """The request's span, its backend call's, and the others by name."""
    (request,) = (s for s in spans if s.kind == "SERVER")
    (backend,) = (s for s in spans if s.kind == "CLIENT")
    return request, backend, {s.name: s for s in spans if s.kind == "INTERNAL"}


def trace_context_sent(simulator, marker: str) -> dict[str, str]:
    """The trace headers the simulator got with the chat request whose prompt holds ``marker``."""
    requests = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/requests").json()["data"]
    contexts = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/trace-context").json()["data"]
    assert len(requests) == len(contexts)
    for request, context in zip(requests, contexts, strict=True):
        if marker in str(request["messages"]):
            return context
    raise AssertionError(f"no chat request with {marker}")


def test_request_span_follows_the_genai_conventions_under_the_clients_trace(
    traced, gateway, tenant, local_simulator
):
    header, trace_id, parent_id = traceparent()
    marker = f"otel-{secrets.token_hex(4)}"
    raw = gateway.openai(tenant.key).responses.with_raw_response.create(
        model="sim-model",
        input=f"{marker} [[tokens:5]]",
        max_output_tokens=50,
        temperature=0.5,
        extra_headers={"traceparent": header, "tracestate": "vendor=1"},
    )
    response = raw.parse()
    request, backend, spans = by_kind(exported(traced, trace_id, 5))
    assert request.name == "chat sim-model"
    assert request.parent_id == parent_id
    assert request.resource["service.name"] == "switchyard"
    attributes = request.attributes
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "switchyard"
    assert attributes["gen_ai.request.model"] == "sim-model"
    assert attributes["gen_ai.response.model"] == "sim-model"
    assert attributes["gen_ai.response.id"] == response.id
    assert attributes["gen_ai.usage.input_tokens"] == response.usage.input_tokens > 0
    assert attributes["gen_ai.usage.output_tokens"] == response.usage.output_tokens == 5
    assert attributes["gen_ai.request.max_tokens"] == 50
    assert attributes["gen_ai.request.temperature"] == 0.5
    assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert attributes["http.response.status_code"] == 200
    assert attributes["switchyard.request_id"] == raw.headers["x-request-id"]
    assert attributes["switchyard.organisation_id"] == str(tenant.organisation.id)
    assert attributes["switchyard.backend.name"] == "sim"
    assert "error.type" not in attributes
    assert request.status == "UNSET"
    # Nothing the client wrote, and no key, goes on a span.
    every = [request, backend, *spans.values()]
    assert not any(marker in str(v) for s in every for v in s.attributes.values())
    assert not any(tenant.key in str(v) for s in every for v in s.attributes.values())

    assert backend.name == "chat sim-model"
    assert backend.parent_id == request.span_id
    assert backend.attributes["http.response.status_code"] == 200
    assert backend.attributes["server.address"] == "127.0.0.1"
    assert backend.attributes["gen_ai.request.model"] == "sim-model"
    assert spans["queue wait"].parent_id == request.span_id
    assert spans["backend connect"].parent_id == backend.span_id
    assert spans["first token"].parent_id == backend.span_id
    for child in (spans["queue wait"], backend, spans["first token"]):
        assert request.start_ns <= child.start_ns <= child.end_ns <= request.end_ns
    assert spans["queue wait"].end_ns <= backend.start_ns + 1_000_000

    # The backend was called under the same trace, as the backend span's child.
    sent = trace_context_sent(local_simulator, marker)
    assert sent["traceparent"] == f"00-{trace_id}-{backend.span_id}-01"
    assert sent["tracestate"] == "vendor=1"


def test_a_failed_request_span_says_why_and_a_bad_traceparent_starts_a_new_trace(
    traced, gateway, tenant
):
    answer = gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {tenant.key}", "traceparent": "00-zz-not-a-trace"},
        json={"model": "sim-model", "input": "[[status:500]]"},
    )
    assert answer.status_code == 502
    request_id = answer.headers["x-request-id"]

    def request_span():
        return next(
            (
                s
                for s in traced.spans()
                if s.kind == "SERVER" and s.attributes.get("switchyard.request_id") == request_id
            ),
            None,
        )

    from responses_api.runtime import telemetry

    telemetry.flush()
    request = wait_for(request_span, timeout=10)
    assert request.parent_id == ""  # a root: the header was not a trace context
    assert request.status == "ERROR"
    assert request.attributes["http.response.status_code"] == 502
    assert request.attributes["error.type"] == "bad_gateway"
    _, backend, _ = by_kind(traced.trace(request.trace_id))
    assert backend.attributes["http.response.status_code"] == 500
    assert backend.attributes["error.type"] == "500"


def test_a_request_refused_before_authentication_leaves_no_span(traced, gateway, tenant):
    header, trace_id, _ = traceparent()
    answer = gateway.http.post(
        "/v1/responses",
        headers={"authorization": "Bearer sk-not-a-key", "traceparent": header},
        json={"model": "sim-model", "input": "hi"},
    )
    assert answer.status_code == 401
    # A request that is traced, after it, is exported; the refused one never is.
    header2, trace_id2, _ = traceparent()
    gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {tenant.key}", "traceparent": header2},
        json={"model": "sim-model", "input": "hi"},
    )
    exported(traced, trace_id2, 4)
    assert traced.trace(trace_id) == []


def test_without_an_endpoint_there_is_no_tracer_and_no_traceparent_is_sent(
    untraced, gateway, tenant, local_simulator
):
    from responses_api.runtime import telemetry

    assert telemetry.install() is False
    assert telemetry.tracer is None
    header, _, _ = traceparent()
    marker = f"untraced-{secrets.token_hex(4)}"
    answer = gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {tenant.key}", "traceparent": header},
        json={"model": "sim-model", "input": f"{marker} [[tokens:3]]"},
    )
    assert answer.status_code == 200
    assert trace_context_sent(local_simulator, marker) == {}
    assert telemetry.current.get() is None


def test_an_untraced_web_process_never_loads_the_trace_sdk():
    """Neither the SDK's tracing nor the exporter (redis-py loads the SDK's
    metrics for its own use whenever the SDK is installed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, config.asgi; "
            "from responses_api.runtime import telemetry; "
            "print(telemetry.tracer, any(m.startswith(('opentelemetry.sdk.trace', "
            "'opentelemetry.exporter')) for m in sys.modules))",
        ],
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.stdout.split() == ["None", "False"], loaded.stderr[-2000:]


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_web_process_exports_its_spans_when_it_stops(collector, people, provision):
    """daphne with the endpoint set: a queued stream's spans (a backend of
    one slot, busy) are exported at SIGTERM, under ``OTEL_SERVICE_NAME``,
    though the batch delay is far longer than the test."""
    simulator = start_simulator()
    try:
        from responses_api.catalogue.services.backends import backend_ensure

        backend_ensure(
            organisation=people["acme"],
            name="sim",
            base_url=simulator.url,
            dialect="openai",
            max_concurrency=1,
        )
        tenant = provision("acme", simulator.url)
        server = start_daphne(
            server_env(
                OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                OTEL_SERVICE_NAME="edge-gateway",
                OTEL_BSP_SCHEDULE_DELAY="600000",
            )
        )
        try:
            headers = {"authorization": f"Bearer {tenant.key}"}
            first = threading.Thread(
                target=httpx.post,
                args=(server.url + "/v1/responses",),
                kwargs={
                    "headers": headers,
                    "json": {"model": "sim-model", "input": "[[delay:600]] [[tokens:2]]"},
                    "timeout": 30,
                },
            )
            first.start()
            wait_for(
                lambda: (
                    httpx.get(simulator.url.removesuffix("/v1") + "/_sim/stats").json()["in_flight"]
                    == 1
                ),
                timeout=10,
            )
            header, trace_id, parent_id = traceparent()
            with httpx.stream(
                "POST",
                server.url + "/v1/responses",
                headers={**headers, "traceparent": header},
                json={"model": "sim-model", "input": "[[tokens:4]]", "stream": True},
                timeout=30,
            ) as stream:
                assert stream.status_code == 200
                assert "response.completed" in stream.read().decode()
            first.join(30)
            # A stream its client abandons after the first delta: a 499.
            gone, gone_trace, _ = traceparent()
            with httpx.stream(
                "POST",
                server.url + "/v1/responses",
                headers={**headers, "traceparent": gone},
                json={"model": "sim-model", "input": "[[rate:5]] [[tokens:100]]", "stream": True},
                timeout=30,
            ) as stream:
                for line in stream.iter_lines():
                    if "output_text.delta" in line:
                        break
            wait_rows(1, status=499)
            assert collector.trace(trace_id) == []  # held in the batch
        finally:
            server.stop()
        abandoned, backend, _ = by_kind(collector.trace(gone_trace))
        assert abandoned.attributes["http.response.status_code"] == 499
        assert abandoned.attributes["error.type"] == "client_disconnected"
        assert abandoned.status == "UNSET"  # the client's doing, not the server's
        assert backend.end_ns <= abandoned.end_ns
        request, _, spans = by_kind(collector.trace(trace_id))
        assert request.parent_id == parent_id
        assert request.resource["service.name"] == "edge-gateway"
        assert request.attributes["switchyard.stream"] is True
        assert request.attributes["gen_ai.usage.output_tokens"] == 4
        assert request.attributes["switchyard.queue_wait_ms"] > 100
        queue = spans["queue wait"]
        assert queue.parent_id == request.span_id
        assert queue.end_ns - queue.start_ns > 100_000_000
        assert {"backend connect", "first token"} <= spans.keys()
        assert collector.paths and set(collector.paths) == {"/v1/traces"}
    finally:
        simulator.stop()


def test_a_backend_that_cannot_be_reached_leaves_a_failed_client_span(traced, gateway, provision):
    tenant = provision("acme", f"http://127.0.0.1:{free_port()}/v1")
    header, trace_id, _ = traceparent()
    answer = gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {tenant.key}", "traceparent": header},
        json={"model": "sim-model", "input": "hi"},
    )
    assert answer.status_code == 503
    request, backend, spans = by_kind(exported(traced, trace_id, 3))
    assert request.attributes["error.type"] == "backend_unreachable"
    assert request.status == "ERROR"
    assert backend.status == "ERROR"
    assert backend.attributes["error.type"] == "BackendUnreachable"
    assert "http.response.status_code" not in backend.attributes
    assert "backend connect" not in spans and "first token" not in spans


def test_a_client_trace_not_sampled_is_passed_on_and_not_recorded(
    traced, gateway, tenant, local_simulator
):
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    marker = f"unsampled-{secrets.token_hex(4)}"
    answer = gateway.http.post(
        "/v1/responses",
        headers={
            "authorization": f"Bearer {tenant.key}",
            "traceparent": f"00-{trace_id}-{parent_id}-00",
        },
        json={"model": "sim-model", "input": f"{marker} [[tokens:2]]"},
    )
    assert answer.status_code == 200
    sent = trace_context_sent(local_simulator, marker)["traceparent"]
    version, sent_trace, sent_parent, flags = sent.split("-")
    assert (version, sent_trace, flags) == ("00", trace_id, "00")
    assert sent_parent != parent_id  # the gateway's own (unrecorded) span
    # A sampled request after it is exported; the unsampled one never is.
    header, sampled_trace, _ = traceparent()
    gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {tenant.key}", "traceparent": header},
        json={"model": "sim-model", "input": "hi"},
    )
    exported(traced, sampled_trace, 5)
    assert traced.trace(trace_id) == []


def test_another_endpoint_is_named_by_its_method_without_genai_attributes(traced, gateway, tenant):
    header, trace_id, parent_id = traceparent()
    answer = gateway.http.get(
        "/v1/models", headers={"authorization": f"Bearer {tenant.key}", "traceparent": header}
    )
    assert answer.status_code == 200
    (request,) = exported(traced, trace_id, 1)
    assert (request.name, request.kind, request.parent_id) == ("GET", "SERVER", parent_id)
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["url.path"] == "/models"
    assert request.attributes["switchyard.request_id"] == answer.headers["x-request-id"]
    assert not any(key.startswith("gen_ai.") for key in request.attributes)
