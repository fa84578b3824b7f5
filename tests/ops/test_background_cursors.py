"""The cursor of a background response's replay
(``GET /v1/responses/{id}?stream=true&starting_after=N``) against a web
process as deployed, with whichever event log the environment gives it
(its memory, or Redis streams with ``REDIS_URL``): a cursor that is not a
number from -1 to the last event's is a 400 naming ``starting_after``, a
valid one replays each later event once, in order, with one terminal
event, and no cursor holds the process's event loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest

from tests.conftest import Proc, server_env, start_daphne, wait_for, wait_rows
from tests.support import healthz_watch

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TERMINAL = {"response.completed", "response.failed", "response.incomplete", "response.cancelled"}
# The cursors that froze the embedded process, or made Redis refuse the read.
HOSTILE = ("-99999999999999999999", "-3", "-2")


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker) -> Iterator[Proc]:
    # The worker is a thread of the web process in both modes: no Celery.
    server = start_daphne(server_env(SWITCHYARD_BACKGROUND_RUNNER="local"))
    yield server
    server.stop()


@pytest.fixture
def tenant(provision, people, simulator):
    from tests.store.conftest import store_policy

    store_policy(people["acme"])
    return provision("acme", simulator.url, dialect="vllm")


def _events(body: bytes) -> list[dict]:
    return [orjson.loads(b.split(b"\ndata: ", 1)[1]) for b in body.split(b"\n\n") if b.strip()]


def _completed(http: httpx.Client, text: str) -> tuple[str, int]:
    """A background response run to its end: its id and how many events it has."""
    queued = http.post(
        "/v1/responses", json={"model": "sim-model", "input": text, "background": True}
    ).json()
    wait_for(lambda: http.get(f"/v1/responses/{queued['id']}").json()["status"] == "completed", 30)
    whole = _events(http.get(f"/v1/responses/{queued['id']}?stream=true").content)
    assert [e["sequence_number"] for e in whole] == list(range(len(whole)))
    return queued["id"], len(whole)


def test_every_cursor_is_refused_or_replays_each_event_once(web, tenant):
    headers = {"authorization": f"Bearer {tenant.key}"}
    with httpx.Client(base_url=web.url, headers=headers, timeout=30) as http:
        response_id, count = _completed(http, "[[tokens:8]] count")
        last = count - 1
        refused = [
            *HOSTILE,
            "-1000",
            "99999999999999999999",
            str(2**63),
            str(2**64 - 1),
            str(2**64),
            "9" * 200,
            str(count),  # one past the last event
            str(count + 1),
            "+5",
            " 5",
            "5 ",
            "1e3",
            "1.0",
            "0x1",
            "1_0",
            "\u0663",  # ARABIC-INDIC DIGIT THREE: int() reads it as 3
            "\uff11",  # FULLWIDTH DIGIT ONE
            "",
            "-",
            "--1",
            "five",
        ]
        answers = {}
        for cursor in refused:
            answer = http.get(
                f"/v1/responses/{response_id}",
                params={"stream": "true", "starting_after": cursor},
                timeout=5,
            )
            answers[cursor] = answer
            assert answer.status_code == 400, (cursor, answer.text[:300])
            error = answer.json()["error"]
            assert error["param"] == "starting_after", cursor
            assert error["type"] == "invalid_request_error"
            assert answer.headers["x-request-id"]

        replayed = {}
        for cursor in ("-1", "0", "-0", "00", "1", str(last // 2), str(last - 1), str(last)):
            answer = http.get(
                f"/v1/responses/{response_id}",
                params={"stream": "true", "starting_after": cursor},
                timeout=10,
            )
            assert answer.status_code == 200, (cursor, answer.text[:300])
            replayed[cursor] = answer
            after = int(cursor)
            numbers = [e["sequence_number"] for e in _events(answer.content)]
            kinds = [e["type"] for e in _events(answer.content)]
            assert numbers == list(range(after + 1, count)), cursor
            assert len(set(numbers)) == len(numbers)
            assert sum(kind in TERMINAL for kind in kinds) == (after < last), cursor
            if after < last:
                assert kinds[-1] == "response.completed"

    # One usage row for each request, refused or served.
    for status, sent in ((400, answers), (200, replayed)):
        for cursor, answer in sent.items():
            rows = wait_rows(request_id=answer.headers["x-request-id"], timeout=15)
            assert [row.status for row in rows] == [status], cursor


def test_a_follower_from_any_cursor_gets_each_event_once_while_it_runs(web, tenant):
    """Followed while it runs, from the start and from a point in the log:
    the events that come after the replay are not sent twice either."""
    headers = {"authorization": f"Bearer {tenant.key}"}
    with httpx.Client(base_url=web.url, headers=headers, timeout=30) as http:
        queued = http.post(
            "/v1/responses",
            json={
                "model": "sim-model",
                "input": "[[rate:40]] [[tokens:40]] go",
                "background": True,
            },
        ).json()
        path = f"/v1/responses/{queued['id']}?stream=true&starting_after="
        wait_for(
            lambda: http.get(f"/v1/responses/{queued['id']}").json()["status"] == "in_progress"
        )
        results: dict[int, list[dict]] = {}

        def follow(after: int) -> None:
            results[after] = _events(http.get(path + str(after)).content)

        threads = [threading.Thread(target=follow, args=(after,)) for after in (-1, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    for after, got in results.items():
        numbers = [e["sequence_number"] for e in got]
        assert numbers == list(range(after + 1, numbers[-1] + 1))
        assert [e["type"] for e in got].count("response.completed") == 1
        assert got[-1]["type"] == "response.completed"
    assert len(results) == 2


def test_hostile_cursors_leave_healthz_answering(web, tenant):
    headers = {"authorization": f"Bearer {tenant.key}"}
    with httpx.Client(base_url=web.url, headers=headers, timeout=30) as http:
        response_id, _ = _completed(http, "[[tokens:12]] fourteen events")
    stop = threading.Event()
    sent: list[int] = []

    def hostile() -> None:
        """The hostile requests, over and over; each read for at most 1 s
        and 1 MB (the frozen process streamed its events without end)."""
        with httpx.Client(base_url=web.url, headers=headers, timeout=2) as client:
            while not stop.is_set():
                for cursor in HOSTILE:
                    url = f"/v1/responses/{response_id}?stream=true&starting_after={cursor}"
                    received = 0
                    started = time.monotonic()
                    try:
                        with client.stream("GET", url) as stream:
                            sent.append(stream.status_code)
                            for chunk in stream.iter_raw():
                                received += len(chunk)
                                if received > 1_000_000 or time.monotonic() - started > 1:
                                    break
                    except httpx.HTTPError:
                        sent.append(0)
                    time.sleep(0.02)  # one at a time is enough to freeze a process

    attacker = threading.Thread(target=hostile, daemon=True)
    with healthz_watch(web.url) as took:
        attacker.start()
        try:
            wait_for(lambda: sent, timeout=10)
            # Twenty probes while the hostile requests come, one at a time.
            probed = len(took["during"])
            wait_for(lambda: len(took["during"]) >= probed + 20, timeout=60)
        finally:
            stop.set()
            attacker.join(10)
    assert set(sent) == {400}
