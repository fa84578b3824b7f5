"""Behaviour the hot path's optimisations must keep (see bench/README.md)."""

import pytest
from openai import OpenAI

from tests.conftest import wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def acme(provision, simulator):
    return provision("acme", simulator.url)


def test_consecutive_requests_over_kept_alive_backend_connections_succeed(api_server, acme):
    client = OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
    for _ in range(20):
        assert client.responses.create(model="sim-model", input="[[tokens:2]]").output_text
    with client.responses.stream(model="sim-model", input="[[tokens:4]]") as stream:
        assert stream.get_final_response().usage.output_tokens == 4
    rows = wait_rows(organisation=acme.organisation, count=21)
    assert all(row.status == 200 for row in rows)
