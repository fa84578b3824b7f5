"""OpenTelemetry traces of the requests that are not one HTTP exchange: a
WebSocket turn (a SERVER span under the upgrade request's trace) and a
background run (a CONSUMER span under the span of the POST that queued it,
across the worker's thread). A real daphne process exports them to the
OTLP collector started here."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import httpx
import pytest
from websockets.sync.client import connect as ws_connect

from tests.conftest import ROOT, Proc, _log_path, server_env, start_daphne, wait_for
from tests.ops.otlp_collector import Collector, Span
from tests.ops.test_otel import trace_context_sent, traceparent
from tests.store.conftest import store_policy

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def traced_server(django_db_setup, django_db_blocker):
    """A web process tracing to a collector of its own, with its spans sent
    every 100 ms; the embedded default's worker runs background responses."""
    collector = Collector()
    server = start_daphne(
        server_env(
            REDIS_URL="",
            SWITCHYARD_BACKGROUND_RUNNER="local",
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
            OTEL_BSP_SCHEDULE_DELAY="100",
        )
    )
    yield collector, server
    server.stop()
    collector.stop()


def spans_of(collector: Collector, trace_id: str, names: set[str]) -> dict[str, list[Span]]:
    """The trace's spans by name, once every name in ``names`` came."""

    def found():
        by_name: dict[str, list[Span]] = {}
        for span in collector.trace(trace_id):
            by_name.setdefault(span.name, []).append(span)
        return names <= by_name.keys() and by_name

    return wait_for(found, timeout=15)


def test_a_websocket_turn_is_traced_as_a_request_under_the_upgrades_trace(
    traced_server, provision, simulator
):
    collector, server = traced_server
    tenant = provision("acme", simulator.url)
    header, trace_id, parent_id = traceparent()
    marker = f"ws-{secrets.token_hex(4)}"
    with ws_connect(
        server.url.replace("http://", "ws://") + "/v1/responses",
        additional_headers={
            "authorization": f"Bearer {tenant.key}",
            "traceparent": header,
            "tracestate": "vendor=ws",
        },
    ) as socket:
        answers = []
        for turn in range(2):
            socket.send(
                json.dumps(
                    {
                        "type": "response.create",
                        "model": "sim-model",
                        "input": f"{marker} turn {turn} [[tokens:3]]",
                        "temperature": 0.25,
                    }
                )
            )
            while (event := json.loads(socket.recv(timeout=30)))["type"] != "response.completed":
                assert event["type"] != "error", event
            answers.append(event["response"])

    names = {"chat sim-model", "queue wait", "backend connect", "first token"}
    wait_for(lambda: len(collector.trace(trace_id)) >= 10, timeout=15)
    spans = spans_of(collector, trace_id, names)
    turns = sorted(
        (s for s in spans["chat sim-model"] if s.kind == "SERVER"), key=lambda s: s.start_ns
    )
    calls = [s for s in spans["chat sim-model"] if s.kind == "CLIENT"]
    assert len(turns) == len(calls) == 2
    for turn, answer in zip(turns, answers, strict=True):
        assert turn.parent_id == parent_id  # each turn, under the upgrade's trace
        attributes = turn.attributes
        assert attributes["switchyard.transport"] == "websocket"
        assert "http.request.method" not in attributes
        assert attributes["url.path"] == "/responses"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "sim-model"
        assert attributes["gen_ai.response.id"] == answer["id"]
        assert attributes["gen_ai.usage.output_tokens"] == 3
        assert attributes["gen_ai.request.temperature"] == 0.25
        assert attributes["switchyard.stream"] is True
        assert attributes["switchyard.organisation_id"] == str(tenant.organisation.id)
        assert attributes["switchyard.backend.name"] == "sim"
        assert attributes["http.response.status_code"] == 200
        (call,) = (c for c in calls if c.parent_id == turn.span_id)
        children = {s.name for s in collector.trace(trace_id) if s.parent_id == call.span_id}
        assert children == {"backend connect", "first token"}
        assert any(s.parent_id == turn.span_id for s in spans["queue wait"])
        assert turn.start_ns <= call.start_ns <= call.end_ns <= turn.end_ns
    assert (
        turns[0].attributes["switchyard.request_id"] != turns[1].attributes["switchyard.request_id"]
    )
    # The backend was called as the client span's child, with the client's tracestate.
    sent = trace_context_sent(simulator, f"{marker} turn 1")
    (second,) = (c for c in calls if c.parent_id == turns[1].span_id)
    assert sent["traceparent"] == f"00-{trace_id}-{second.span_id}-01"
    assert sent["tracestate"] == "vendor=ws"


def test_a_background_run_is_traced_under_the_post_that_queued_it(
    traced_server, people, provision, simulator
):
    collector, server = traced_server
    store_policy(people["acme"])
    tenant = provision("acme", simulator.url)
    check_background_trace(collector, server, tenant, simulator)


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL)")
def test_a_background_run_on_a_celery_worker_joins_the_posts_trace(people, provision, simulator):
    store_policy(people["acme"])
    tenant = provision("acme", simulator.url)
    collector = Collector()
    env = server_env(
        SWITCHYARD_BACKGROUND_RUNNER="celery",
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    log = _log_path("celery-worker")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo"]
        + ["--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    worker = Proc(process, "", 0, log)
    server = start_daphne(env)
    try:
        wait_for(lambda: " ready." in worker.output(), timeout=60)
        check_background_trace(collector, server, tenant, simulator)
    finally:
        server.stop()
        worker.stop()
        collector.stop()


def check_background_trace(collector: Collector, server: Proc, tenant, simulator) -> None:
    """A background response's POST and run: the run's span is the POST's
    child, in its trace, with the request's attributes and child spans."""
    header, trace_id, parent_id = traceparent()
    marker = f"bg-{secrets.token_hex(4)}"
    created = httpx.post(
        server.url + "/v1/responses",
        headers={"authorization": f"Bearer {tenant.key}", "traceparent": header},
        json={"model": "sim-model", "input": f"{marker} [[tokens:4]]", "background": True},
        timeout=30,
    )
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]

    names = {"chat sim-model", "queue wait", "backend connect", "first token"}
    wait_for(lambda: len(collector.trace(trace_id)) >= 6, timeout=15)
    spans = spans_of(collector, trace_id, names)
    (post,) = (s for s in spans["chat sim-model"] if s.kind == "SERVER")
    (run,) = (s for s in spans["chat sim-model"] if s.kind == "CONSUMER")
    (call,) = (s for s in spans["chat sim-model"] if s.kind == "CLIENT")
    assert post.parent_id == parent_id
    assert post.attributes["switchyard.request_id"] == created.headers["x-request-id"]
    # The run is the POST's child, in the same trace, though a worker ran it.
    assert run.parent_id == post.span_id
    assert run.trace_id == post.trace_id == trace_id
    attributes = run.attributes
    assert attributes["switchyard.transport"] == "background"
    assert attributes["switchyard.request_id"] == created.headers["x-request-id"]
    assert attributes["gen_ai.request.model"] == "sim-model"
    assert attributes["gen_ai.response.id"] == response_id
    assert attributes["gen_ai.usage.output_tokens"] == 4
    assert attributes["switchyard.backend.name"] == "sim"
    assert attributes["http.response.status_code"] == 200
    assert call.parent_id == run.span_id
    (queue,) = spans["queue wait"]
    assert queue.parent_id == run.span_id
    assert spans["backend connect"][0].parent_id == call.span_id
    assert spans["first token"][0].parent_id == call.span_id
    # Placed when the run ran, after the POST began.
    assert post.start_ns <= run.start_ns <= call.start_ns <= call.end_ns <= run.end_ns
    sent = trace_context_sent(simulator, marker)
    assert sent["traceparent"] == f"00-{trace_id}-{call.span_id}-01"
