"""The tool loop as a background response (``background: true``): queued at
once, run on the worker, polled to its end, and streamed again from its
event log, the ``mcp_call`` and ``web_search_call`` events in OpenAI's order
and numbered from 0, resumable from any of them (``starting_after``); one
usage row counts the tool calls. The real MCP server and search API
processes answer, the simulator is the model."""

from __future__ import annotations

import pytest
from openai import OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.catalogue.services.web_search import web_search_bind
from tests.conftest import usage_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def local_worker(settings):
    """The web process's worker thread runs the responses (as in
    tests/store/test_background.py), its database connection closed after."""
    from asgiref.sync import SyncToAsync
    from django.db import connections

    from responses_api.background.run import local_worker

    settings.SWITCHYARD_BACKGROUND_RUNNER = "local"
    yield
    wait_for(lambda: not local_worker.running, timeout=30)
    local_worker.close()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def polled(client: OpenAI, response_id: str, status: str):
    return wait_for(
        lambda: (r := client.responses.retrieve(response_id)).status == status and r, timeout=30
    )


@pytest.fixture
def calc(mcp_server, acme, people):
    mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="calc",
        server_url=mcp_server.url + "/mcp",
        transport="streamable_http",
        require_approval="never",
        allow_private=True,
    )


@pytest.fixture
def searxng(search_api, acme, people):
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )


def replayed(client: OpenAI, response_id: str, after: int | None = None) -> list:
    if after is None:
        return list(client.responses.retrieve(response_id, stream=True))
    return list(client.responses.retrieve(response_id, stream=True, starting_after=after))


def test_an_mcp_loop_runs_in_the_background_and_streams_again(client: OpenAI, calc):
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input='Add. [[call:calc__add {"a": 2, "b": 3}]] [[call:calc__echo {"text": "hi"}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
        background=True,
    )
    queued = raw.parse()
    assert queued.status == "queued"
    done = polled(client, queued.id, "completed")
    assert [item.type for item in done.output] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
        "message",
    ]
    assert [item.output for item in done.output[1:3]] == ["5", "hi"]

    events = replayed(client, queued.id)
    kinds = [event.type for event in events]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert kinds[:3] == ["response.created", "response.queued", "response.in_progress"]
    assert kinds[3:7] == [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
    ]
    finished = [
        k for k in kinds if k in ("response.mcp_call.completed", "response.mcp_call.failed")
    ]
    assert finished == ["response.mcp_call.completed"] * 2
    # Each call ends before the model's answer begins.
    last_call = len(kinds) - 1 - kinds[::-1].index("response.mcp_call.completed")
    assert last_call < kinds.index("response.output_text.delta")
    assert kinds[-1] == "response.completed"
    assert events[-1].response.output[2].output == "hi"

    # Resumed after any event: the rest of the same log.
    cut = kinds.index("response.mcp_call.in_progress")
    tail = replayed(client, queued.id, after=cut)
    assert [e.sequence_number for e in tail] == list(range(cut + 1, len(events)))
    assert [e.type for e in tail] == kinds[cut + 1 :]

    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert (row.status, row.background, row.tool_calls, row.tool_errors) == (200, True, 2, 0)
    assert [call["name"] for call in row.tool_log] == ["add", "echo"]


def test_a_search_runs_in_the_background_and_streams_again(client: OpenAI, searxng):
    with client.responses.create(
        model="sim-model",
        input='When? [[call:web_search {"query": "eiffel tower"}]] '
        "[[answer:It opened in 1889 [1].]]",
        tools=[{"type": "web_search"}],
        background=True,
        stream=True,
    ) as stream:
        live = list(stream)
    response_id = live[0].response.id
    kinds = [event.type for event in live]
    assert kinds[3:8] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in live] == list(range(len(live)))
    # The log holds what the live stream sent, event for event.
    again = replayed(client, response_id)
    assert [e.model_dump() for e in again] == [e.model_dump() for e in live]
    tail = replayed(client, response_id, after=4)
    assert [e.type for e in tail] == kinds[5:]
    final = live[-1].response
    assert [item.type for item in final.output] == ["web_search_call", "message"]
    assert final.output[0].status == "completed"
    rows = wait_for(lambda: usage_rows(response_id=response_id), timeout=10)
    assert [(r.background, r.tool_calls) for r in rows] == [(True, 1)]
