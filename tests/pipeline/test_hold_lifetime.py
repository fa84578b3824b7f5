"""No spend hold outlives its request (docs/admin/budgets.md): whatever
ends it (an answer, a backend's failure or silence, the client leaving, a
refusal after admission, a bug in the relay or in the ending itself, a
WebSocket closed mid-turn, a background run done, cancelled or failed, a
compaction's two calls), nothing stays held for the organisation: not in
Redis (the holds' hash and expiries), not in this process's memory, and no
lease is still renewed.

The API answers in this process (``tests.inprocess``, and the ASGI
consumers driven message by message where the client must leave), against
the simulator's own process, with Redis when REDIS_URL is set, else the
process's memory."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from asgiref.testing import ApplicationCommunicator

from responses_api.pipeline.exchange import Exchange
from responses_api.runtime import redis_conn
from responses_api.usage.holds import local_holds
from responses_api.usage.monthly import month_start
from tests.api.test_consumer import Client, run, scope
from tests.conftest import usage_rows, wait_for
from tests.pipeline.test_limits_every_path import (  # noqa: F401 (fixture)
    PRICES,
    completed,
    local_worker,
    organisation_budget,
)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def acme(provision, simulator, people):
    """Acme, which stores responses, under a budget of 100,000.00; its model
    priced (0.25 an output token) with a first-token deadline of 1 s."""
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update
    from responses_api.catalogue import catalog
    from responses_api.catalogue.services.served_models import model_ensure

    catalog.forget()
    organisation_settings_update(
        organisation=people["acme"],
        actor=CLI,
        data={"retention_policy": "store", "store_ttl_hours": 24},
    )
    made = provision("acme", simulator.url, dialect="vllm")
    model_ensure(
        organisation=made.organisation,
        public_id="sim-model",
        backend=made.backend,
        first_token_timeout=1,
        **PRICES,
    )
    organisation_budget(made.organisation, "100000.00")
    yield made
    catalog.forget()


def base(organisation) -> str:
    return f"sy:spend:organisation:{organisation.id}:{month_start(time.time()):%Y%m}"


def left(organisation) -> dict[str, Any]:
    """Every trace of a hold for the organisation: empty when none is left."""
    name = base(organisation)
    found: dict[str, Any] = {}
    if local_holds.held.get(name):
        found["memory"] = dict(local_holds.held[name])
    renewed = [member for key, member in redis_conn.leases.held if key.startswith(name)]
    if renewed:
        found["renewed"] = renewed
    if redis_conn.enabled():
        client = redis_conn.sync_client()
        try:
            holds = client.hgetall(name + ":h")
            expiries = client.zrange(name + ":z", 0, -1)
        finally:
            client.close()
        holding = {k: v for k, v in holds.items() if k not in (b"_u", b"_t") or int(v)}
        if holding:
            found["redis"] = holding
        if expiries:
            found["expiries"] = expiries
    return found


def held(organisation) -> int:
    """The organisation's held amount (10⁻⁸ units)."""
    name = base(organisation)
    if not redis_conn.enabled():
        return sum(units for units, _ in local_holds.held.get(name, {}).values())
    client = redis_conn.sync_client()
    try:
        return int(client.hget(name + ":h", "_u") or 0)
    finally:
        client.close()


def assert_nothing_held(organisation) -> None:
    assert left(organisation) == {}
    assert held(organisation) == 0


def post(gateway, key: str, body: dict, path: str = "/v1/responses", **headers):
    return gateway.http.post(
        path,
        headers={"authorization": f"Bearer {key}", **headers},
        json={"model": "sim-model", **body},
    )


def row_of(gateway, answer) -> Any:
    gateway.rows.write()
    (row,) = usage_rows(request_id=answer.headers["x-request-id"])
    return row


HISTORY = [
    {"role": "user", "content": "Draft the report " + "with many details " * 20},
    {"role": "assistant", "content": "Here is a long draft " * 30},
    {"role": "user", "content": "Shorten it [[tokens:2]]"},
]

# Each ending of a plain request: its body and headers, and its row's status.
ENDINGS = {
    "completed": ({"input": "hi [[tokens:2]]"}, {}, 200),
    "completed streamed": ({"input": "hi [[tokens:2]]", "stream": True}, {}, 200),
    "failed backend": ({"input": "hi [[status:500]]"}, {}, 502),
    "backend timeout": ({"input": "hi [[delay:3000]]"}, {}, 504),
    "refused after admission": ({"input": "hi"}, {"x-backend-id": "no-such-backend"}, None),
    "compacted": (
        {"input": HISTORY, "context_management": [{"type": "compaction", "compact_threshold": 10}]},
        {},
        200,
    ),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_each_ending_gives_the_hold_back(gateway, acme, ending):
    body, headers, status = ENDINGS[ending]
    answer = post(gateway, acme.key, body, **headers)
    row = row_of(gateway, answer)
    assert row.status == answer.status_code
    if status is not None:
        assert answer.status_code == status, answer.text
    else:
        assert answer.status_code >= 400, answer.text
    assert_nothing_held(acme.organisation)


def test_a_bug_in_the_relay_gives_the_hold_back(gateway, acme, monkeypatch):
    from responses_api.pipeline import create as relay

    async def broken(*args, **kwargs):
        raise RuntimeError("relay bug")

    monkeypatch.setattr(relay, "read_answer", broken)
    answer = post(gateway, acme.key, {"input": "hi [[tokens:2]]"})
    assert answer.status_code == 500
    assert row_of(gateway, answer).status == 500
    assert_nothing_held(acme.organisation)


def test_a_row_that_cannot_be_built_leaves_no_hold(gateway, acme, monkeypatch):
    """A bug in the ending itself: no row is handed over, and yet the
    request's hold is given back."""
    row = Exchange.row

    def broken(self):
        if self.endpoint == "/responses":
            raise RuntimeError("row bug")
        return row(self)

    monkeypatch.setattr(Exchange, "row", broken)
    answer = post(gateway, acme.key, {"input": "hi [[tokens:2]]"})
    assert answer.status_code == 500
    assert_nothing_held(acme.organisation)


def test_a_row_that_cannot_be_handed_over_leaves_no_hold(gateway, acme, monkeypatch):
    def broken(row, scripts=(), then=()):
        raise ConnectionError("the usage sink is away")

    monkeypatch.setattr(gateway.rows, "submit", broken)
    answer = post(gateway, acme.key, {"input": "hi [[tokens:2]]"})
    assert answer.status_code == 500
    assert_nothing_held(acme.organisation)


def test_a_client_gone_mid_stream_gives_the_hold_back(gateway, acme):
    seen = {}

    async def main() -> None:
        client = Client(scope(acme.key))
        body = {"model": "sim-model", "input": "hi [[tokens:50]] [[rate:20]]", "stream": True}
        await client.send_body(orjson.dumps(body))
        await client.read_until(b"response.output_text.delta")
        seen["during"] = held(acme.organisation)
        await client.app.send_input({"type": "http.disconnect"})
        await client.app.wait(10)

    run(main())
    gateway.rows.write()
    (row,) = usage_rows(organisation=acme.organisation)
    assert row.status == 499
    assert seen["during"] > 0  # it did hold while it ran
    assert_nothing_held(acme.organisation)


def test_a_websocket_closed_mid_turn_gives_the_hold_back(gateway, acme):
    from responses_api.edge.websocket import ResponsesSocket

    seen = {}

    async def main() -> None:
        app = ApplicationCommunicator(
            ResponsesSocket(),
            {
                "type": "websocket",
                "path": "/v1/responses",
                "headers": [(b"authorization", f"Bearer {acme.key}".encode())],
                "client": ("127.0.0.1", 5000),
                "server": ("127.0.0.1", 8000),
                "subprotocols": [],
            },
        )
        await app.send_input({"type": "websocket.connect"})
        assert (await app.receive_output(10))["type"] == "websocket.accept"
        frame = {"type": "response.create", "model": "sim-model", "input": "hi [[delay:3000]]"}
        await app.send_input({"type": "websocket.receive", "text": orjson.dumps(frame).decode()})
        while b"response.created" not in (await app.receive_output(10)).get("text", "").encode():
            pass
        seen["during"] = held(acme.organisation)
        await app.send_input({"type": "websocket.disconnect", "code": 1000})
        await app.wait(10)

    run(main())
    gateway.rows.write()
    (row,) = usage_rows(organisation=acme.organisation)
    assert row.status == 499
    assert seen["during"] > 0
    assert_nothing_held(acme.organisation)


@pytest.mark.usefixtures("local_worker")
def test_a_background_run_gives_the_hold_back_however_it_ends(gateway, acme):
    done = post(gateway, acme.key, {"input": "hi [[tokens:2]]", "background": True})
    failed = post(gateway, acme.key, {"input": "hi [[status:500]]", "background": True})
    slow = post(gateway, acme.key, {"input": "hi [[delay:5000]]", "background": True})
    wait_for(lambda: held(acme.organisation) > 0, timeout=10)
    slow_id = slow.json()["id"]
    cancel = gateway.http.post(
        f"/v1/responses/{slow_id}/cancel", headers={"authorization": f"Bearer {acme.key}"}
    )
    assert cancel.status_code == 200, cancel.text
    ends = [completed(gateway, acme.key, a.json()["id"])["status"] for a in (done, failed, slow)]
    assert ends == ["completed", "failed", "cancelled"]
    wait_for(lambda: left(acme.organisation) == {} and held(acme.organisation) == 0, timeout=10)
