"""How long a client follows a background response: no longer than
``SWITCHYARD_BACKGROUND_FOLLOW_SECONDS``, however long the run goes on;
it then resumes from the last event it got, and gets each event once."""

from __future__ import annotations

import time

import orjson
import pytest

from tests.conftest import wait_rows
from tests.store.test_background import SLOW, _local_worker, _poll  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _sse(body: bytes) -> list[dict]:
    return [orjson.loads(block.split(b"\ndata: ", 1)[1]) for block in body.split(b"\n\n") if block]


def test_a_follower_stops_at_the_follow_bound_and_resumes_where_it_stopped(
    gateway, provision, people, local_simulator, settings
):
    from tests.store.conftest import store_policy

    settings.SWITCHYARD_BACKGROUND_FOLLOW_SECONDS = 1
    store_policy(people["acme"])
    # Straight to the simulator (the recorder hands a stream on whole).
    acme = provision("acme", local_simulator.url, dialect="vllm")
    client = gateway.openai(acme.key)
    headers = {"authorization": f"Bearer {acme.key}"}
    queued = client.responses.create(model="sim-model", input=SLOW, background=True)
    _poll(client, queued.id, "in_progress")
    path = f"/v1/responses/{queued.id}?stream=true&starting_after="
    got: list[dict] = []
    request_ids = []
    try:
        for _ in range(4):
            started = time.monotonic()
            after = got[-1]["sequence_number"] if got else -1
            answer = gateway.http.get(path + str(after), headers=headers, timeout=30)
            elapsed = time.monotonic() - started
            assert answer.status_code == 200
            request_ids.append(answer.headers["x-request-id"])
            # The run lasts about 40 s; each follow stops after its second.
            assert 0.9 < elapsed < 5, elapsed
            events = _sse(answer.content)
            assert not {e["type"] for e in events} & {"response.completed", "response.failed"}
            got.extend(events)
    finally:
        client.responses.cancel(queued.id)
    numbers = [e["sequence_number"] for e in got]
    assert numbers == list(range(len(numbers)))
    # Past the three opening events: the later follows resumed the run's own.
    assert len(numbers) > 3
    for request_id in request_ids:
        assert [row.status for row in wait_rows(request_id=request_id)] == [200]
