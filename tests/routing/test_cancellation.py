"""Cancellation: a client that closes the connection — while
queued, while waiting for the first token, mid-stream, or during a
non-streamed request — makes Switchyard close the upstream request at once
(the simulator sees the disconnect within a second), frees the backend
slot, and leaves exactly one usage row: 499, "Client disconnected", with the
tokens produced until then."""

from __future__ import annotations

import time

import orjson
import pytest

from tests.conftest import usage_rows, wait_for, wait_rows
from tests.routing.conftest import KEEPALIVE, RawRequest, sim_stats

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def body(text: str, stream: bool) -> bytes:
    return orjson.dumps({"model": "sim-model", "input": text, "stream": stream})


def assert_backend_saw_disconnect(sim, before: dict, closed_at: float) -> dict:
    stats = wait_for(
        lambda: (s := sim_stats(sim))["disconnects"] > before["disconnects"] and s, timeout=5
    )
    assert stats["disconnects"] == before["disconnects"] + 1
    # The backend noticed within a second of the client leaving.
    assert stats["last_disconnect_at"] - closed_at < 1.0
    wait_for(lambda: sim_stats(sim)["in_flight"] == 0, timeout=5)
    return stats


def the_499_row(fleet):
    row = wait_rows(1, organisation=fleet.organisation, status=499)[0]
    assert row.note == "Client disconnected"
    assert len(usage_rows(organisation=fleet.organisation)) == 1
    return row


def assert_slot_is_free(web, fleet):
    """The backend allows one request at a time: were the cancelled request's
    slot still taken, this one would wait out the queue bound and get a 503."""
    probe = RawRequest(web.next_url(), fleet.key, body("probe [[tokens:3]]", False))
    assert probe.read_until(b'"completed"').startswith(b"HTTP/1.1 200")
    probe.close()


def test_closing_mid_stream_cancels_upstream_and_logs_partial_tokens(web, sims, fleet_for):
    sim = sims[0]
    fleet = fleet_for([sim], max_concurrency=1)
    before = sim_stats(sim)
    request = RawRequest(web.next_url(), fleet.key, body("long [[tokens:400]] [[rate:40]]", True))
    request.read_until(b'"response.output_text.delta"', count=5)
    seen = request.received.count(b'"response.output_text.delta"')
    closed_at = request.close()
    stats = assert_backend_saw_disconnect(sim, before, closed_at)
    row = the_499_row(fleet)
    produced = stats["tokens_produced"] - before["tokens_produced"]
    # What the row counts lies between what the client saw and what the
    # backend produced (tokens in flight when the client left are counted
    # by the backend only).
    assert seen <= row.output_tokens <= produced < 400
    assert row.stream and row.error_code == "client_disconnected"
    assert str(row.backend_id) == str(fleet.backends[0].id)
    assert_slot_is_free(web, fleet)


def test_closing_before_the_first_token_cancels_upstream(web, sims, fleet_for):
    sim = sims[1]
    fleet = fleet_for([sim], max_concurrency=1)
    before = sim_stats(sim)
    request = RawRequest(web.next_url(), fleet.key, body("slow [[delay:8000]]", True))
    request.read_until(b"response.in_progress")
    wait_for(lambda: sim_stats(sim)["in_flight"] == 1)
    closed_at = request.close()
    assert_backend_saw_disconnect(sim, before, closed_at)
    row = the_499_row(fleet)
    assert row.output_tokens == 0 and row.ttft_ms is None
    assert_slot_is_free(web, fleet)


def test_closing_a_non_streamed_request_cancels_upstream(web, sims, fleet_for):
    sim = sims[2]
    fleet = fleet_for([sim], max_concurrency=1)
    before = sim_stats(sim)
    request = RawRequest(web.next_url(), fleet.key, body("long [[tokens:400]] [[rate:40]]", False))
    wait_for(lambda: sim_stats(sim)["tokens_produced"] - before["tokens_produced"] >= 5)
    closed_at = request.close()
    assert request.received == b""  # nothing was answered yet
    stats = assert_backend_saw_disconnect(sim, before, closed_at)
    row = the_499_row(fleet)
    produced = stats["tokens_produced"] - before["tokens_produced"]
    assert 0 < row.output_tokens <= produced < 400
    assert not row.stream
    assert_slot_is_free(web, fleet)


@pytest.mark.parametrize("stream", [True, False])
def test_closing_while_queued_leaves_no_upstream_request(web, sims, fleet_for, stream):
    sim = sims[0]
    fleet = fleet_for([sim], max_concurrency=1)
    before = sim_stats(sim)
    holder = RawRequest(web.next_url(), fleet.key, body("hold [[delay:2500]]", False))
    wait_for(lambda: sim_stats(sim)["in_flight"] == 1)
    queued = RawRequest(web.next_url(), fleet.key, body("queued", stream))
    if stream:
        # The stream starts while queued and says it is in progress.
        queued.read_until(b"response.created", timeout=KEEPALIVE * 10)
    else:
        # The scenario: a non-streaming client, which sees nothing while
        # queued, waits a while in the queue before it gives up.
        time.sleep(KEEPALIVE * 2)
    queued.close()
    row = wait_rows(1, organisation=fleet.organisation, status=499)[0]
    assert row.note == "Client disconnected" and row.attempts == 0
    assert row.backend_id is None and row.queue_wait_ms > 0
    assert holder.read_until(b'"completed"').startswith(b"HTTP/1.1 200")
    holder.close()
    assert_slot_is_free(web, fleet)
    stats = sim_stats(sim)
    assert stats["requests"] - before["requests"] == 2  # the holder and the probe only
    rows = wait_rows(3, organisation=fleet.organisation)
    assert sorted(r.status for r in rows) == [200, 200, 499]
