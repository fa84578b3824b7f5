"""``python -m config.serve``: daphne as web processes run it (config/serve.py).

Its writes leave at once when nothing is queued before them and take
Twisted's buffered path otherwise; a client that reads slowly exercises
both. Its access log is off unless asked for.
"""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from tests.conftest import start_daphne, wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_slow_reader_gets_every_event_in_order(provision, simulator):
    tenant = provision("acme", simulator.url)
    web = start_daphne()
    tokens = 30_000  # megabytes of events: more than the sockets' buffers hold
    try:
        events = []
        with httpx.stream(
            "POST",
            web.url + "/v1/responses",
            headers={"authorization": f"Bearer {tenant.key}"},
            json={"model": "sim-model", "input": f"[[tokens:{tokens}]] go", "stream": True},
            timeout=120,
        ) as response:
            assert response.status_code == 200
            paused = False
            for line in response.iter_lines():
                if not paused and len(events) == 100:
                    time.sleep(2.0)  # let the server's socket buffer fill up
                    paused = True
                if line.startswith("data: "):
                    events.append(orjson.loads(line[6:]))
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        deltas = [e for e in events if e["type"] == "response.output_text.delta"]
        assert len(deltas) == tokens
        final = events[-1]
        assert final["type"] == "response.completed"
        assert final["response"]["output"][0]["content"][0]["text"] == "".join(
            d["delta"] for d in deltas
        )
        assert wait_rows(1, organisation=tenant.organisation)[0].output_tokens == tokens
    finally:
        web.stop()


@pytest.mark.parametrize("args", [(), ("--access-log", "-")])
def test_the_access_log_is_off_unless_asked_for(api_server, args):
    web = start_daphne(args=args)
    try:
        assert httpx.get(web.url + "/healthz", timeout=10).status_code == 200
    finally:
        web.stop()
    logged = '"GET /healthz" 200' in web.log.read_text()
    assert logged == bool(args)
