"""WebSocket mode (docs/api/websocket.md): ``response.create`` frames on
one socket to ``/v1/responses``, through the OpenAI SDK's
``responses.connect()`` and, for frames the SDK would not send, the
``websockets`` client. A live daphne serves them (a WebSocket needs a real
socket), the simulator answers."""

from __future__ import annotations

import contextlib
import json
import time
import uuid

import httpx
import pytest
from openai import BadRequestError, OpenAI
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from tests.conftest import server_env, start_daphne, usage_rows, wait_for, wait_rows
from tests.sim import received

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

BETA = {"OpenAI-Beta": "responses_websockets=2026-02-06"}
TERMINAL = {"response.completed", "response.incomplete", "response.failed", "error"}


def store_policy(org):
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update

    return organisation_settings_update(
        organisation=org, actor=CLI, data={"retention_policy": "store", "store_ttl_hours": 24}
    )


@pytest.fixture
def acme(provision, simulator):
    """The default policy: zero data retention."""
    return provision("acme", simulator.url)


@pytest.fixture
def client(api_server, acme) -> OpenAI:
    return OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)


def ws_url(server, path: str = "/v1/responses") -> str:
    return server.url.replace("http://", "ws://") + path


def until_done(connection) -> list:
    """The events of one response, up to its terminal event."""
    events = []
    for event in connection:
        events.append(event)
        if event.type in TERMINAL:
            return events
    raise AssertionError(f"the socket closed after {[e.type for e in events]}")


def frames_until_done(socket) -> list[dict]:
    events = []
    while True:
        event = json.loads(socket.recv(timeout=30))
        events.append(event)
        if event["type"] in TERMINAL:
            return events


def test_two_turns_continue_on_the_socket_in_a_zdr_organisation(client, acme, simulator):
    from responses_api.models import StoredResponse

    marker = uuid.uuid4().hex[:8]
    with client.responses.connect(extra_headers=BETA) as connection:
        connection.response.create(model="sim-model", input=f"first-{marker} [[text:noted]]")
        first = until_done(connection)
        assert first[-1].type == "response.completed", first[-1]
        response = first[-1].response
        assert response.output_text == "noted" and response.store is False
        connection.response.create(
            model="sim-model",
            previous_response_id=response.id,
            input=f"second-{marker} [[tokens:2]]",
        )
        second = until_done(connection)
    assert second[-1].type == "response.completed", second[-1]
    assert second[-1].response.previous_response_id == response.id
    # The backend got the whole conversation: the first turn's input and
    # answer, then the new input.
    messages = received(simulator, f"second-{marker}")["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert f"first-{marker}" in str(messages[0]["content"])
    assert messages[1]["content"] == "noted"
    # Nothing was stored; one row per response.create.
    assert not StoredResponse.objects.filter(organisation=acme.organisation).exists()
    rows = wait_rows(2, organisation=acme.organisation)
    assert [(r.method, r.endpoint, r.status, r.stream) for r in rows] == [
        ("WS", "/responses", 200, True)
    ] * 2


def test_an_id_the_socket_did_not_answer_is_not_found(client, acme):
    with client.responses.connect() as connection:
        connection.response.create(
            model="sim-model", previous_response_id="resp_unknown", input="[[tokens:2]]"
        )
        (event,) = until_done(connection)
        assert event.type == "error" and event.status == 400
        assert event.error.code == "previous_response_not_found"
        # The socket goes on.
        connection.response.create(model="sim-model", input="[[tokens:2]]")
        assert until_done(connection)[-1].type == "response.completed"
    rows = wait_rows(2, organisation=acme.organisation)
    assert sorted(r.status for r in rows) == [200, 400]


def test_another_organisations_stored_response_is_not_found(
    api_server, provision, simulator, people
):
    store_policy(people["acme"])
    store_policy(people["globex"])
    acme = provision("acme", simulator.url)
    globex = provision("globex", simulator.url)
    acme_client = OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
    stored = acme_client.responses.create(model="sim-model", input="[[text:mine]]")
    globex_client = OpenAI(base_url=api_server.url + "/v1", api_key=globex.key, max_retries=0)
    with globex_client.responses.connect() as connection:
        connection.response.create(
            model="sim-model", previous_response_id=stored.id, input="[[tokens:2]]"
        )
        (event,) = until_done(connection)
        assert event.type == "error" and event.error.code == "previous_response_not_found"
        assert event.error.message == f"Previous response with id '{stored.id}' not found."
    # Acme continues it over a socket from the store (it was stored).
    with acme_client.responses.connect() as connection:
        connection.response.create(
            model="sim-model", previous_response_id=stored.id, input="[[text:again]]"
        )
        events = until_done(connection)
    assert events[-1].type == "response.completed"
    assert events[-1].response.previous_response_id == stored.id


def test_prewarm_answers_without_the_backend_and_starts_the_chain(client, acme, simulator):
    marker = uuid.uuid4().hex[:8]
    before = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/stats").json()["requests"]
    with client.responses.connect() as connection:
        connection.response.create(
            model="sim-model", instructions="Be brief.", input=f"warm-{marker}", generate=False
        )
        warm = until_done(connection)
        assert [e.type for e in warm] == [
            "response.created",
            "response.in_progress",
            "response.completed",
        ]
        prewarmed = warm[-1].response
        assert prewarmed.output == [] and prewarmed.usage.total_tokens == 0
        stats = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/stats").json()
        assert stats["requests"] == before
        # Codex then sends only what is new, continuing the prewarmed id.
        connection.response.create(
            model="sim-model",
            instructions="Be brief.",
            previous_response_id=prewarmed.id,
            input=f"go-{marker} [[tokens:2]]",
        )
        assert until_done(connection)[-1].type == "response.completed"
    messages = received(simulator, f"go-{marker}")["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    assert f"warm-{marker}" in str(messages[1]["content"])
    rows = wait_rows(2, organisation=acme.organisation)
    warm_row = next(r for r in rows if r.output_tokens == 0)
    assert warm_row.status == 200 and warm_row.backend_id is None


def test_events_are_those_of_sse_for_the_same_request(client):
    request = {
        "model": "sim-model",
        "input": "[[reason:think first]] [[tokens:5]]",
        "instructions": "Be brief.",
    }
    sse = [event.model_dump() for event in client.responses.create(stream=True, **request)]
    with client.responses.connect() as connection:
        connection.response.create(**request)
        frames = [event.model_dump() for event in until_done(connection)]

    def shape(events):
        return [(e["type"], e["sequence_number"], e.get("delta")) for e in events]

    def output(events):  # item ids are minted per response
        return [
            {k: v for k, v in item.items() if k != "id"}
            for item in events[-1]["response"]["output"]
        ]

    assert shape(frames) == shape(sse)
    assert output(frames) == output(sse)


def test_closing_mid_response_cancels_it_and_leaves_a_499_row(api_server, acme, simulator):
    stats_url = simulator.url.removesuffix("/v1") + "/_sim/stats"
    disconnects = httpx.get(stats_url).json()["disconnects"]
    with ws_connect(
        ws_url(api_server), additional_headers={"Authorization": f"Bearer {acme.key}"}
    ) as socket:
        socket.send(
            json.dumps(
                {
                    "type": "response.create",
                    "model": "sim-model",
                    "input": "[[tokens:400]] [[rate:20]]",
                }
            )
        )
        while json.loads(socket.recv(timeout=30))["type"] != "response.output_text.delta":
            pass
    (row,) = wait_rows(1, organisation=acme.organisation)
    assert row.status == 499 and row.method == "WS"
    assert 0 < row.output_tokens < 400 or row.output_tokens == 0
    # The backend request was cancelled with the socket.
    wait_for(lambda: httpx.get(stats_url).json()["disconnects"] > disconnects, timeout=10)


def test_bad_frames_get_error_frames_and_the_socket_goes_on(api_server, acme):
    with ws_connect(
        ws_url(api_server), additional_headers={"Authorization": f"Bearer {acme.key}"}
    ) as socket:
        answers = []
        for frame in (
            "not json",
            b"\x00binary",
            json.dumps(["a", "list"]),
            json.dumps({"type": "session.update"}),
            json.dumps({"type": "response.create", "model": "sim-model"}),
            json.dumps(
                {"type": "response.create", "model": "sim-model", "input": "x", "generate": 1}
            ),
        ):
            socket.send(frame)
            answers.append(json.loads(socket.recv(timeout=30)))
        assert all(a["type"] == "error" and a["status"] == 400 for a in answers), answers
        assert [a["error"]["code"] for a in answers[:4]] == [
            "invalid_json",
            "invalid_json",
            "invalid_json",
            "invalid_event_type",
        ]
        assert answers[4]["error"]["param"] == "input"
        assert answers[5]["error"]["param"] == "generate"
        assert all(a["headers"]["x-request-id"] for a in answers)
        # Acknowledgements ask for nothing; a good frame is then answered.
        socket.send(json.dumps({"type": "response.processed", "response_id": "resp_x"}))
        socket.send(
            json.dumps({"type": "response.create", "model": "sim-model", "input": "[[tokens:2]]"})
        )
        assert frames_until_done(socket)[-1]["type"] == "response.completed"
    rows = wait_rows(7, organisation=acme.organisation)
    assert sorted(r.status for r in rows) == [200] + [400] * 6


def test_a_bad_key_gets_a_401_error_frame_and_the_close(api_server, acme):
    with ws_connect(
        ws_url(api_server), additional_headers={"Authorization": "Bearer sk-sy-nope"}
    ) as socket:
        error = json.loads(socket.recv(timeout=30))
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=30)
    assert error["type"] == "error" and error["status"] == 401
    assert error["error"]["code"] == "invalid_api_key"
    assert closed.value.rcvd.code == 4401
    assert not usage_rows(organisation=acme.organisation)


def test_other_paths_are_refused_with_an_error_frame(api_server, acme):
    with ws_connect(
        ws_url(api_server, "/v1/models"), additional_headers={"Authorization": f"Bearer {acme.key}"}
    ) as socket:
        error = json.loads(socket.recv(timeout=30))
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=30)
    assert error["status"] == 404 and error["error"]["code"] == "unknown_url"
    assert closed.value.rcvd.code == 4404


def test_a_key_revoked_mid_connection_stops_the_next_turn(client, acme):
    from accounts.audit import CLI
    from accounts.models import ApiKey
    from accounts.services.api_keys import api_key_revoke

    with client.responses.connect() as connection:
        connection.response.create(model="sim-model", input="[[tokens:2]]")
        assert until_done(connection)[-1].type == "response.completed"
        api_key_revoke(api_key=ApiKey.objects.get(organisation=acme.organisation), actor=CLI)

        def refused():
            # The server's key cache forgets the key within moments
            # (SWITCHYARD_AUTH_CACHE_SECONDS): a turn then gets the 401.
            connection.response.create(model="sim-model", input="[[tokens:2]]")
            event = until_done(connection)[-1]
            return event if event.type == "error" else None

        event = wait_for(refused, timeout=10)
        with pytest.raises(ConnectionClosed):
            connection.recv()
    assert event.status == 401 and event.error.code == "invalid_api_key"
    assert all(r.status == 200 for r in wait_rows(1, organisation=acme.organisation))


def test_permessage_deflate_is_negotiated_when_offered(api_server, acme):
    with ws_connect(
        ws_url(api_server),
        additional_headers={"Authorization": f"Bearer {acme.key}"},
        compression="deflate",
    ) as socket:
        negotiated = socket.response.headers.get("Sec-WebSocket-Extensions", "")
        socket.send(
            json.dumps({"type": "response.create", "model": "sim-model", "input": "[[tokens:3]]"})
        )
        assert frames_until_done(socket)[-1]["type"] == "response.completed"
    assert negotiated.startswith("permessage-deflate"), negotiated
    with ws_connect(
        ws_url(api_server),
        additional_headers={"Authorization": f"Bearer {acme.key}"},
        compression=None,
    ) as socket:
        assert "Sec-WebSocket-Extensions" not in socket.response.headers


def test_the_connection_limit_ends_the_socket_with_its_error(acme):
    server = start_daphne(server_env(SWITCHYARD_WEBSOCKET_MAX_SECONDS="2"))
    try:
        client = OpenAI(base_url=server.url + "/v1", api_key=acme.key, max_retries=0)
        with client.responses.connect() as connection:
            connection.response.create(model="sim-model", input="[[tokens:2]]")
            assert until_done(connection)[-1].type == "response.completed"
            started = time.monotonic()
            event = connection.recv()
            waited = time.monotonic() - started
            with pytest.raises(ConnectionClosed):
                connection.recv()
        assert event.type == "error" and event.error.code == "websocket_connection_limit_reached"
        assert waited < 5
    finally:
        server.stop()


def test_a_client_piling_up_frames_is_closed(api_server, acme):
    slow = {"type": "response.create", "model": "sim-model", "input": "[[tokens:60]] [[rate:10]]"}
    with ws_connect(
        ws_url(api_server), additional_headers={"Authorization": f"Bearer {acme.key}"}
    ) as socket:
        # The server may close while the last of them still go out: that is
        # the point; what it said comes below.
        with contextlib.suppress(ConnectionClosed):
            for _ in range(30):
                socket.send(json.dumps(slow))
        events = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                events.append(json.loads(socket.recv(timeout=30)))
    errors = [e for e in events if e["type"] == "error"]
    assert errors[-1]["status"] == 429 and errors[-1]["error"]["code"] == "too_many_frames"
    assert closed.value.rcvd.code == 4429
    # The response under way was cut by the server, for the client's frames:
    # its row says so, as the refused frame's does.
    # (none was under way if the frames all came in before one began).
    wait_rows(1, organisation=acme.organisation)
    time.sleep(1)
    rows = usage_rows(organisation=acme.organisation)
    assert {(r.status, r.error_code) for r in rows} == {(429, "too_many_frames")}


def test_a_storing_organisation_continues_unstored_responses_on_the_socket(
    api_server, provision, simulator, people
):
    from responses_api.models import StoredResponse

    store_policy(people["acme"])
    acme = provision("acme", simulator.url)
    client = OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
    marker = uuid.uuid4().hex[:8]
    with client.responses.connect() as connection:
        connection.response.create(
            model="sim-model", store=False, input=f"one-{marker} [[text:first]]"
        )
        first = until_done(connection)[-1].response
        assert first.store is False
        connection.response.create(
            model="sim-model",
            store=False,
            previous_response_id=first.id,
            input=f"two-{marker} [[tokens:2]]",
        )
        assert until_done(connection)[-1].type == "response.completed"
    messages = received(simulator, f"two-{marker}")["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert not StoredResponse.objects.filter(organisation=acme.organisation).exists()
    # Over HTTP the same id is unknown: it lived on the socket only.
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(model="sim-model", previous_response_id=first.id, input="x")
    assert caught.value.code == "previous_response_not_found"
