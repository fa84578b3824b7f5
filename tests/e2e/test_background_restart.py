"""Background responses across processes, as deployed: two daphne web
processes and a Celery worker sharing PostgreSQL-or-SQLite and Redis.

A web process killed while it streams a background response loses nothing:
another one resumes the stream with ``starting_after``, and what the client
got from both is byte for byte the stream read in one piece. A Celery
worker killed mid-response leaves its response ``failed``, found by the
beat's reaper, with the create request's usage row saying so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest
from openai import OpenAI

from tests.conftest import ROOT, Proc, _log_path, server_env, start_daphne, wait_for, wait_rows

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL)"),
]

# About 60 events over 3 s: long enough to be cut in the middle.
SLOW = "[[rate:20]] [[tokens:60]] a long report"
LEASE_SECONDS = "2"


def _env() -> dict[str, str]:
    return server_env(
        SWITCHYARD_BACKGROUND_RUNNER="celery",
        SWITCHYARD_BACKGROUND_LEASE_SECONDS=LEASE_SECONDS,
    )


def _start_worker() -> Proc:
    """``celery -A config worker`` (one process, so that killing it kills
    the run), waiting until it takes tasks."""
    log = _log_path("celery-worker")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=_env(),
    )
    proc = Proc(process, "", 0, log)

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"the Celery worker exited:\n{proc.output()[-3000:]}")
        return " ready." in proc.output()

    wait_for(ready, timeout=60)
    return proc


@pytest.fixture(autouse=True)
def _orm_thread_closed():
    """The reaper run here does its database work on asgiref's one thread
    for the ORM: its connection closes before the database is flushed."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def tenant(provision, people, simulator):
    from tests.store.conftest import store_policy

    store_policy(people["acme"])
    return provision("acme", simulator.url, dialect="vllm")


@pytest.fixture
def worker(tenant) -> Iterator[Proc]:
    proc = _start_worker()
    yield proc
    proc.stop()


@pytest.fixture
def webs(tenant) -> Iterator[tuple[Proc, Proc]]:
    first, second = start_daphne(_env()), start_daphne(_env())
    yield first, second
    first.stop()
    second.stop()


def _events(body: bytes) -> list[dict]:
    return [orjson.loads(b.split(b"\ndata: ", 1)[1]) for b in body.split(b"\n\n") if b]


def test_a_stream_resumed_on_another_web_process_is_byte_identical(tenant, worker, webs):
    first, second = webs
    headers = {"authorization": f"Bearer {tenant.key}"}
    body = {"model": "sim-model", "input": SLOW, "background": True, "stream": True}
    received = b""
    with (
        httpx.Client(base_url=first.url, headers=headers, timeout=30) as http,
        http.stream("POST", "/v1/responses", json=body) as stream,
    ):
        request_id = stream.headers["x-request-id"]
        for chunk in stream.iter_raw():
            received += chunk
            if received.count(b"response.output_text.delta\n") >= 10:
                break
        # The web process dies mid-stream; the worker goes on.
        first.process.kill()
        first.process.wait(10)
    # What the client holds: the events it got whole.
    kept = received[: received.rfind(b"\n\n") + 2]
    seen = _events(kept)
    last = seen[-1]["sequence_number"]
    assert last >= 12 and seen[-1]["type"] == "response.output_text.delta"
    response_id = seen[0]["response"]["id"]

    with httpx.Client(base_url=second.url, headers=headers, timeout=30) as http:
        resumed = http.get(f"/v1/responses/{response_id}?stream=true&starting_after={last}")
        assert resumed.status_code == 200
        whole = http.get(f"/v1/responses/{response_id}?stream=true")
    events = _events(whole.content)
    assert events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert kept + resumed.content == whole.content

    client = OpenAI(base_url=second.url + "/v1", api_key=tenant.key, max_retries=0)
    done = client.responses.retrieve(response_id)
    assert done.status == "completed"
    assert done.output_text == events[-1]["response"]["output"][0]["content"][0]["text"]
    # One row for the create request, written by the worker with its tokens.
    rows = wait_rows(request_id=request_id)
    assert len(rows) == 1
    assert rows[0].status == 200 and rows[0].output_tokens == done.usage.output_tokens


def test_a_killed_worker_leaves_its_response_failed(tenant, worker, webs):
    from responses_api.tasks import reap_background_responses

    _, web = webs
    client = OpenAI(base_url=web.url + "/v1", api_key=tenant.key, max_retries=0)
    raw = client.responses.with_raw_response.create(
        model="sim-model", input="[[rate:5]] [[tokens:400]] go", background=True
    )
    queued = raw.parse()
    wait_for(lambda: client.responses.retrieve(queued.id).status == "in_progress", timeout=30)
    worker.process.send_signal(signal.SIGKILL)
    worker.process.wait(10)

    # The beat's sweep finds the lease run out and fails the response.
    assert wait_for(reap_background_responses, timeout=15) == 1
    failed = client.responses.retrieve(queued.id)
    assert failed.status == "failed"
    assert failed.error is not None
    assert "stopped before it finished" in failed.error.message
    with client.responses.stream(response_id=queued.id) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.failed"
    rows = wait_rows(request_id=raw.headers["x-request-id"])
    assert [(row.status, row.error_code) for row in rows] == [(500, "worker_lost")]


def test_a_response_cancelled_while_queued_never_runs(tenant, webs, simulator):
    """No worker yet: the response waits in Celery's queue. Cancelled there,
    it ends at once, with its row; the worker that takes it later runs
    nothing and writes no second row."""
    _, web = webs
    client = OpenAI(base_url=web.url + "/v1", api_key=tenant.key, max_retries=0)
    before = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/stats").json()["requests"]
    raw = client.responses.with_raw_response.create(
        model="sim-model", input="[[tokens:5]] never", background=True
    )
    queued = raw.parse()
    assert client.responses.retrieve(queued.id).status == "queued"
    assert client.responses.cancel(queued.id).status == "cancelled"
    with client.responses.stream(response_id=queued.id) as stream:
        kinds = [event.type for event in stream]
    assert kinds == ["response.created", "response.queued"]

    worker = _start_worker()
    try:
        rows = wait_rows(request_id=raw.headers["x-request-id"])
    finally:
        worker.stop()
    assert [row.status for row in rows] == [499]
    assert client.responses.retrieve(queued.id).status == "cancelled"
    after = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/stats").json()["requests"]
    assert after == before


def test_cancel_reaches_the_worker_and_aborts_the_backend_within_two_seconds(
    tenant, worker, webs, simulator
):
    _, web = webs
    client = OpenAI(base_url=web.url + "/v1", api_key=tenant.key, max_retries=0)
    stats = simulator.url.removesuffix("/v1") + "/_sim/stats"
    before = httpx.get(stats).json()["disconnects"]
    queued = client.responses.create(
        model="sim-model", input="[[rate:5]] [[tokens:400]] go", background=True
    )
    wait_for(lambda: client.responses.retrieve(queued.id).status == "in_progress", timeout=30)
    started = time.monotonic()
    cancelled = client.responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    assert time.monotonic() - started < 2.0
    wait_for(lambda: httpx.get(stats).json()["disconnects"] > before, timeout=2.0)
