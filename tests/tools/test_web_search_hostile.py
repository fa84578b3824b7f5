"""A search provider's answer is untrusted input: a provider that hangs,
sends too much, sends no JSON, breaks the connection or compresses fails
its search, the model is told, and the response goes on to one row."""

from __future__ import annotations

import time

import pytest
from openai import OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.web_search import web_search_bind
from tests.conftest import free_port, usage_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def searxng(search_api, acme, people, settings):
    settings.SWITCHYARD_WEB_SEARCH_TIMEOUT_SECONDS = 1.5
    return web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )


@pytest.mark.parametrize(
    ("query", "told"),
    [
        ("hang", "did not answer within 1.5 seconds"),
        ("huge", "larger than 1048576 bytes"),
        ("garbage", "was not valid JSON"),
        ("shapeless", "did not hold search results"),
        ("drop", "broke the connection"),
        ("gzip", "compressed answer"),
        ("failing", "HTTP status 500"),
    ],
)
def test_a_hostile_provider_fails_the_search_not_the_response(client: OpenAI, searxng, query, told):
    started = time.monotonic()
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input=f'[[call:web_search {{"query": "{query} it"}}]]',
        tools=[{"type": "web_search"}],
    )
    response = raw.parse()
    assert time.monotonic() - started < 10
    assert response.status == "completed"
    searched, message = response.output
    assert (searched.type, searched.status) == ("web_search_call", "failed")
    assert message.content[0].annotations == []
    assert response.output_text.startswith(f'Tool result: The web search for "{query} it" failed')
    assert told in response.output_text
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert row.status == 200
    assert (row.tool_calls, row.tool_errors) == (1, 1)


def test_a_provider_that_is_gone_fails_the_search(client: OpenAI, acme, people):
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={
            "kind": "searxng",
            "base_url": f"http://127.0.0.1:{free_port()}",
            "allow_private": True,
        },
    )
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "anyone"}]]',
        tools=[{"type": "web_search"}],
    )
    assert response.output[0].status == "failed"
    assert "could not be reached" in response.output_text


def test_a_broken_search_ends_a_stream_cleanly(client: OpenAI, searxng):
    with client.responses.stream(
        model="sim-model",
        input='[[call:web_search {"query": "drop it"}]]',
        tools=[{"type": "web_search"}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.web_search_call.completed" not in kinds
    assert kinds[-1] == "response.completed"
    assert final.output[0].status == "failed"
    [row] = wait_for(lambda: usage_rows(model="sim-model"), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (1, 1)


def test_a_provider_on_a_private_address_is_refused_without_staff_leave(
    search_api, people, settings
):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    from django.core.exceptions import ValidationError

    from accounts.audit import Actor

    alice = people["alice"]
    with pytest.raises(ValidationError) as refused:
        web_search_bind(
            organisation=people["acme"],
            actor=Actor.console(alice),
            data={"kind": "searxng", "base_url": search_api.url},
        )
    assert "loopback" in refused.value.message_dict["base_url"][0]
    # Nor may an organisation's admin set the flag that would open it.
    with pytest.raises(ValidationError):
        web_search_bind(
            organisation=people["acme"],
            actor=Actor.console(alice),
            data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
        )


def test_neither_the_query_nor_the_key_reaches_the_log(
    client: OpenAI, search_api, people, acme, caplog
):
    from tests.tools.servers.search_api import BRAVE_KEY

    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={
            "kind": "brave",
            "base_url": search_api.url,
            "api_key": BRAVE_KEY,
            "allow_private": True,
        },
    )
    with caplog.at_level("DEBUG", logger="switchyard"):
        response = client.responses.create(
            model="sim-model",
            input='[[call:web_search {"query": "private matter 7731"}]]',
            tools=[{"type": "web_search"}],
        )
    assert response.output[0].status == "completed"
    logged = caplog.text
    assert "private matter 7731" not in logged and "private+matter" not in logged
    assert BRAVE_KEY not in logged
