"""Background responses through the OpenAI SDK: queued at once, polled to
their end, streamed again from any event, cancelled within 2 s with the
backend request aborted, refused for a ZDR organisation, and another
organisation's id answered as a missing one. The responses run on the
in-process worker thread (the embedded default's), against the simulator."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest
from openai import BadRequestError, InternalServerError, NotFoundError, OpenAI

from tests.conftest import usage_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = "[[rate:10]] [[tokens:400]] go slowly"


@pytest.fixture(autouse=True)
def _local_worker(settings):
    """The worker thread of the web process, with or without Redis."""
    from responses_api.background.run import local_worker

    settings.SWITCHYARD_BACKGROUND_RUNNER = "local"
    yield
    wait_for(lambda: not local_worker.running, timeout=30)
    local_worker.close()
    # The worker's database work ran on asgiref's one thread for the ORM
    # (the worker thread has no request around it): its connection closes
    # here, before the test database is flushed or dropped.
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def _poll(client: OpenAI, response_id: str, *statuses: str, timeout: float = 30.0):
    return wait_for(
        lambda: (r := client.responses.retrieve(response_id)).status in statuses and r,
        timeout=timeout,
    )


def _sse(body: bytes) -> list[dict]:
    return [orjson.loads(block.split(b"\ndata: ", 1)[1]) for block in body.split(b"\n\n") if block]


def test_a_background_response_is_queued_at_once_then_completes(client, gateway):
    raw = client.responses.with_raw_response.create(
        model="sim-model", input="[[text:done in the background]] go", background=True
    )
    queued = raw.parse()
    assert queued.status == "queued"
    assert queued.background is True
    assert queued.output == []
    done = _poll(client, queued.id, "completed")
    assert done.output_text == "done in the background"
    assert done.background is True
    assert done.usage is not None and done.usage.output_tokens > 0
    # The create request's row, finished by the worker: one row, its id.
    request_id = raw.headers["x-request-id"]
    rows = wait_for(lambda: usage_rows(request_id=request_id), timeout=10)
    assert len(rows) == 1
    assert rows[0].status == 200
    assert rows[0].output_tokens == done.usage.output_tokens
    # The client's POST was not streamed, and its row says so: the run
    # streaming to the response's log is the server's business.
    assert rows[0].stream is False
    # It names the response it queued, as the trace page shows it.
    assert (rows[0].response_id, rows[0].background) == (queued.id, True)
    # Its input items are kept like any stored response's.
    items = client.responses.input_items.list(queued.id)
    assert [item.type for item in items.data] == ["message"]


def test_a_background_stream_replays_byte_for_byte_from_any_event(client, gateway, acme):
    with client.responses.create(
        model="sim-model", input="[[tokens:12]] stream it", background=True, stream=True
    ) as stream:
        events = list(stream)
    assert [e.type for e in events[:3]] == [
        "response.created",
        "response.queued",
        "response.in_progress",
    ]
    assert events[0].response.status == "queued"
    assert events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    response_id = events[0].response.id
    assert [row.stream for row in usage_rows(endpoint="/responses")] == [True]

    headers = {"authorization": f"Bearer {acme.key}"}
    whole = gateway.http.get(f"/v1/responses/{response_id}?stream=true", headers=headers)
    assert whole.status_code == 200
    assert whole.headers["content-type"].startswith("text/event-stream")
    assert [e["sequence_number"] for e in _sse(whole.content)] == list(range(len(events)))
    cut = 5
    tail = gateway.http.get(
        f"/v1/responses/{response_id}?stream=true&starting_after={cut}", headers=headers
    )
    blocks = whole.content.split(b"\n\n")
    assert tail.content == b"\n\n".join(blocks[cut + 1 :])

    # The SDK's own resumption: retrieve(stream=True, starting_after=N).
    resumed = list(client.responses.retrieve(response_id, stream=True, starting_after=cut))
    assert [e.sequence_number for e in resumed] == list(range(cut + 1, len(events)))
    assert resumed[-1].response.output_text == events[-1].response.output_text
    # And responses.stream(response_id=...), whose state machine checks the order.
    with client.responses.stream(response_id=response_id) as again:
        final = again.get_final_response()
    assert final.id == response_id
    assert final.status == "completed"


def test_cancel_ends_a_running_response_within_two_seconds_and_aborts_the_backend(
    gateway, provision, people, local_simulator
):
    from tests.store.conftest import store_policy

    store_policy(people["acme"])
    # Straight to the simulator (no recorder): its own count of disconnects.
    acme = provision("acme", local_simulator.url, dialect="vllm")
    client = gateway.openai(acme.key)
    stats_url = local_simulator.url.removesuffix("/v1") + "/_sim/stats"
    before = httpx.get(stats_url).json()["disconnects"]

    raw = client.responses.with_raw_response.create(model="sim-model", input=SLOW, background=True)
    queued = raw.parse()
    _poll(client, queued.id, "in_progress")
    wait_for(lambda: httpx.get(stats_url).json()["in_flight"] > 0, timeout=10)
    started = time.monotonic()
    cancelled = client.responses.cancel(queued.id)
    took = time.monotonic() - started
    assert cancelled.status == "cancelled"
    assert took < 2.0
    # The backend saw its request go, within the same 2 s.
    wait_for(lambda: httpx.get(stats_url).json()["disconnects"] > before, timeout=2.0)
    assert client.responses.retrieve(queued.id).status == "cancelled"
    # Cancelling again answers the same; the row is the create request's, a 499.
    assert client.responses.cancel(queued.id).status == "cancelled"
    rows = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert [row.status for row in rows] == [499]


def test_cancel_is_refused_for_a_response_not_in_the_background(client):
    plain = client.responses.create(model="sim-model", input="[[tokens:3]] now")
    with pytest.raises(BadRequestError) as refused:
        client.responses.cancel(plain.id)
    assert "background" in refused.value.message
    with pytest.raises(BadRequestError) as replay:
        client.responses.retrieve(plain.id, stream=True)
    assert replay.value.body["param"] == "stream"


def test_a_completed_response_cannot_be_cancelled(client):
    queued = client.responses.create(model="sim-model", input="[[tokens:3]] go", background=True)
    _poll(client, queued.id, "completed")
    with pytest.raises(BadRequestError) as refused:
        client.responses.cancel(queued.id)
    assert "completed" in refused.value.message


def test_a_zdr_organisation_gets_a_400_that_says_why(gateway, initech):
    client = gateway.openai(initech.key)
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(model="sim-model", input="x", background=True)
    assert refused.value.body["param"] == "background"
    assert "zero data retention" in refused.value.message


def test_background_without_store_is_a_400(client):
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(model="sim-model", input="x", background=True, store=False)
    assert refused.value.body["param"] == "store"


def test_another_organisations_background_response_is_a_missing_one(gateway, client, acme, globex):
    queued = client.responses.create(model="sim-model", input=SLOW, background=True)
    other = gateway.openai(globex.key)
    answers = []
    for response_id in (queued.id, "resp_" + "0" * 32):
        for ask in (
            lambda i: other.responses.retrieve(i),
            lambda i: other.responses.cancel(i),
            lambda i: list(other.responses.retrieve(i, stream=True)),
            lambda i: list(other.responses.retrieve(i, stream=True, starting_after=1)),
        ):
            with pytest.raises(NotFoundError) as missing:
                ask(response_id)
            answers.append(missing.value.body["message"].replace(response_id, "ID"))
    assert answers[:4] == answers[4:]
    # Globex's attempts changed nothing: it is still Acme's, and still running.
    assert client.responses.retrieve(queued.id).status in ("queued", "in_progress")
    assert client.responses.cancel(queued.id).status == "cancelled"


def test_a_worker_that_stops_leaves_its_response_failed(client, settings):
    """A worker that stops renewing its lease (here: its event loop frozen)
    is found out by the next read, which ends the response as failed."""
    from responses_api.background import run as background_run

    settings.SWITCHYARD_BACKGROUND_LEASE_SECONDS = 1.0
    queued = client.responses.create(model="sim-model", input=SLOW, background=True)
    _poll(client, queued.id, "in_progress")
    worker = background_run.local_worker
    frozen = worker.loop
    assert frozen is not None
    frozen.call_soon_threadsafe(frozen.stop)
    worker.loop = None  # the next response gets a new one
    worker.running.clear()  # the frozen run will never end
    failed = _poll(client, queued.id, "failed", timeout=15)
    assert failed.error is not None
    assert "stopped before it finished" in failed.error.message
    with client.responses.stream(response_id=queued.id) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.failed"


def test_malformed_stream_queries_and_unknown_ids_are_4xx_with_the_envelope(gateway, acme, client):
    queued = client.responses.create(model="sim-model", input="[[tokens:3]] go", background=True)
    headers = {"authorization": f"Bearer {acme.key}"}
    bad = gateway.http.get(
        f"/v1/responses/{queued.id}?stream=true&starting_after=later", headers=headers
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "starting_after"
    assert bad.headers["x-request-id"]
    for method, path in (
        ("POST", "/v1/responses/resp_unknown/cancel"),
        ("GET", "/v1/responses/resp_unknown?stream=true&starting_after=3"),
        ("POST", "/v1/responses/%00/cancel"),
    ):
        answer = gateway.http.request(method, path, headers=headers)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["code"] == "response_not_found"
        assert answer.headers["x-request-id"]
    wrong = gateway.http.get(f"/v1/responses/{queued.id}/cancel", headers=headers)
    assert wrong.status_code == 405


def test_a_backend_that_refuses_fails_the_response_with_its_error(client, acme):
    raw = client.responses.with_raw_response.create(
        model="sim-model", input="[[status:400]] refuse", background=True
    )
    queued = raw.parse()
    failed = _poll(client, queued.id, "failed")
    assert failed.error is not None and failed.error.message
    with client.responses.stream(response_id=queued.id) as stream:
        kinds = [event.type for event in stream]
    assert kinds == ["response.created", "response.queued", "response.failed"]
    rows = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert len(rows) == 1 and rows[0].status >= 400
    assert rows[0].error_code == failed.error.code


def test_a_response_that_no_worker_can_take_fails_at_once(client, monkeypatch, settings):
    """Celery's broker is unreachable: the request is a 500 with its row,
    and the response it stored is failed, not queued for ever."""
    from celery import Celery

    from responses_api.background import run as background_run
    from responses_api.models import StoredResponse
    from responses_api.store.responses import response_get
    from tests.conftest import free_port

    settings.SWITCHYARD_BACKGROUND_RUNNER = "celery"
    unreachable = Celery("switchyard", broker=f"redis://127.0.0.1:{free_port()}/0")
    unreachable.conf.broker_connection_retry_on_startup = False
    monkeypatch.setattr(background_run, "_celery", lambda: unreachable)
    raw = client.responses.with_raw_response
    with pytest.raises(InternalServerError):
        raw.create(model="sim-model", input="x", background=True)
    (row,) = StoredResponse.objects.all()
    stored = response_get(organisation_id=row.organisation_id, response_id=row.id)
    assert stored is not None and stored.response["status"] == "failed"
    assert [r.status for r in usage_rows(endpoint="/responses")] == [500]
