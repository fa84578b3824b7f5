"""Backend failures as a client sees them.

What a caller gets when the backend misbehaves (an error status, a cut
stream, no answer, silence), that each case leaves its row, and that kept-alive
backend connections are reused safely.
"""

import pytest
from django.conf import settings
from openai import APIStatusError, OpenAI

from tests.conftest import free_port, server_env, start_daphne, wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def acme(provision, simulator):
    return provision("acme", simulator.url)


@pytest.fixture
def client(api_server, acme):
    return OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)


def test_backend_error_status_becomes_a_gateway_error(client, acme):
    with pytest.raises(APIStatusError) as caught:
        client.responses.create(model="sim-model", input="[[status:500]]")
    # With no other backend to try, routing answers 502 or 503; either way an
    # error envelope, at once, and one row with the same status.
    status = caught.value.status_code
    assert status in (502, 503)
    assert caught.value.response.json()["error"]["code"]
    assert wait_rows(organisation=acme.organisation)[0].status == status


def test_stream_cut_by_the_backend_ends_with_response_failed(client, acme):
    with client.responses.stream(model="sim-model", input="[[tokens:8]] [[drop-after:3]]") as s:
        events = list(s)
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) == 3
    assert events[-1].type == "response.failed"
    row = wait_rows(organisation=acme.organisation)[0]
    assert row.status == 502 and row.output_tokens == 3


def test_unreachable_backend_is_a_503(api_server, provision, people):
    tenant = provision("globex", f"http://127.0.0.1:{free_port()}/v1")
    client = OpenAI(base_url=api_server.url + "/v1", api_key=tenant.key, max_retries=0)
    with pytest.raises(APIStatusError) as caught:
        client.responses.create(model="sim-model", input="hi")
    assert caught.value.status_code == 503
    assert caught.value.response.json()["error"]["code"] in (
        "backend_unreachable",
        "no_backend_available",
    )


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
    reason="a second server process on the SQLite test database contends for its lock",
)
def test_silent_backend_hits_the_read_timeout(acme):
    server = start_daphne(server_env(SWITCHYARD_READ_TIMEOUT="0.5"))
    try:
        client = OpenAI(base_url=server.url + "/v1", api_key=acme.key, max_retries=0)
        with pytest.raises(APIStatusError) as caught:
            client.responses.create(model="sim-model", input="[[delay:3000]] [[tokens:2]]")
        # The backend answered its headers and first chunk, then went silent.
        assert caught.value.status_code == 502
        assert "ReadTimeout" in caught.value.response.json()["error"]["message"]
        assert wait_rows(organisation=acme.organisation)[0].status == 502
    finally:
        server.stop()


def test_consecutive_requests_over_kept_alive_backend_connections_succeed(client, acme):
    for _ in range(20):
        assert client.responses.create(model="sim-model", input="[[tokens:2]]").output_text
    with client.responses.stream(model="sim-model", input="[[tokens:4]]") as stream:
        assert stream.get_final_response().usage.output_tokens == 4
    rows = wait_rows(organisation=acme.organisation, count=21)
    assert all(row.status == 200 for row in rows)
