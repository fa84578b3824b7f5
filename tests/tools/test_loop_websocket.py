"""The tool loop in WebSocket mode: an MCP call, a web search and an
approval over ``response.create`` frames on one socket (the OpenAI SDK's
``responses.connect()``), against a live daphne, the simulator, a real MCP
server process and a real search API process. Each turn's events are in
OpenAI's order and numbered from 0; each leaves one usage row counting its
tool calls; an approval continues the socket's own chain in an organisation
that stores nothing, or answers the items sent back."""

from __future__ import annotations

import uuid

import httpx
import pytest
from openai import OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.catalogue.services.web_search import web_search_bind
from tests.api.test_websocket import BETA, until_done
from tests.conftest import wait_for, wait_rows
from tests.sim import received

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

NEVER = [{"type": "mcp", "server_label": "calc", "require_approval": "never"}]
ALWAYS = [{"type": "mcp", "server_label": "gate", "require_approval": "always"}]


@pytest.fixture
def zdr(provision, simulator, people, mcp_server, search_api):
    """Acme with the default policy (it stores nothing), its MCP server
    registered twice (``calc``, ``gate`` whose calls need approval) and a
    search provider bound."""
    tenant = provision("acme", simulator.url)
    mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="calc",
        server_url=mcp_server.url + "/mcp",
        transport="streamable_http",
        require_approval="never",
        allow_private=True,
    )
    # The same server, whose calls wait for the client's approval.
    mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="gate",
        server_url=mcp_server.url + "/mcp",
        transport="streamable_http",
        require_approval="always",
        allow_private=True,
    )
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )
    return tenant


@pytest.fixture
def socket_client(api_server, zdr) -> OpenAI:
    return OpenAI(base_url=api_server.url + "/v1", api_key=zdr.key, max_retries=0)


def kinds(events) -> list[str]:
    return [event.type for event in events]


def numbered(events) -> bool:
    return [event.sequence_number for event in events] == list(range(len(events)))


def test_an_mcp_call_and_a_search_run_on_one_socket(socket_client, zdr):
    with socket_client.responses.connect(extra_headers=BETA) as connection:
        connection.response.create(
            model="sim-model", input='Add. [[call:calc__add {"a": 2, "b": 3}]]', tools=NEVER
        )
        called = until_done(connection)
        connection.response.create(
            model="sim-model",
            input='When? [[call:web_search {"query": "eiffel tower"}]] '
            "[[answer:It opened in 1889 [1].]]",
            tools=[{"type": "web_search"}],
        )
        searched = until_done(connection)

    assert called[-1].type == "response.completed", called[-1]
    assert numbered(called)
    order = kinds(called)
    assert order[:6] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
    ]
    call_events = [k for k in order if k.startswith("response.mcp_call")]
    assert call_events[0] == "response.mcp_call.in_progress"
    assert call_events[-2:] == ["response.mcp_call_arguments.done", "response.mcp_call.completed"]
    # The call ends before the answer that read it begins.
    assert order.index("response.mcp_call.completed") < order.index("response.output_text.delta")
    final = called[-1].response
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert final.output[1].output == "5" and final.output_text == "Tool result: 5"

    assert searched[-1].type == "response.completed", searched[-1]
    assert numbered(searched)
    order = kinds(searched)
    assert order[2:7] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    answer = searched[-1].response
    assert [item.type for item in answer.output] == ["web_search_call", "message"]
    assert len(answer.output[1].content[0].annotations) == 1

    rows = wait_rows(2, organisation=zdr.organisation)
    assert [(r.method, r.status, r.tool_calls) for r in rows] == [("WS", 200, 1), ("WS", 200, 1)]
    assert [r.tool_log[0]["type"] for r in rows] == ["mcp", "web_search"]


def test_an_approval_continues_the_sockets_own_chain(socket_client, zdr, simulator):
    marker = uuid.uuid4().hex[:8]
    with socket_client.responses.connect(extra_headers=BETA) as connection:
        connection.response.create(
            model="sim-model",
            input=f'{marker} [[call:gate__add {{"a": 20, "b": 22}}]]',
            tools=ALWAYS,
        )
        first = until_done(connection)
        assert first[-1].type == "response.completed", first[-1]
        response = first[-1].response
        assert [item.type for item in response.output] == [
            "mcp_list_tools",
            "mcp_approval_request",
        ]
        asked = response.output[1]
        connection.response.create(
            model="sim-model",
            previous_response_id=response.id,
            input=[
                {"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}
            ],
            tools=ALWAYS,
        )
        second = until_done(connection)
        assert second[-1].type == "response.completed", second[-1]
        answered = second[-1].response
        assert numbered(second)
        # The socket's chain moved on: its first response is no longer continued.
        connection.response.create(
            model="sim-model",
            previous_response_id=response.id,
            input=[
                {"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}
            ],
            tools=ALWAYS,
        )
        (replayed,) = until_done(connection)
        assert replayed.type == "error" and replayed.status == 400

    assert answered.previous_response_id == response.id
    called = [item for item in answered.output if item.type == "mcp_call"]
    assert [(c.output, c.approval_request_id) for c in called] == [("42", asked.id)]
    assert answered.output_text == "Tool result: 42"
    # The backend read the chain: the question, the call and its result.
    messages = received(simulator, marker)["messages"]
    assert messages[0]["role"] == "user" and marker in str(messages[0]["content"])
    rows = wait_rows(3, organisation=zdr.organisation)
    assert [(r.status, r.tool_calls) for r in rows] == [(200, 0), (200, 1), (400, 0)]


def test_an_approval_with_the_items_sent_back_on_a_socket(socket_client, zdr):
    question = {"role": "user", "content": '[[call:gate__add {"a": 4, "b": 4}]]'}
    with socket_client.responses.connect(extra_headers=BETA) as connection:
        connection.response.create(model="sim-model", input=[question], tools=ALWAYS)
        first = until_done(connection)
        asked = first[-1].response.output[1].model_dump(exclude_none=True)
        assert asked["type"] == "mcp_approval_request"
        answering = [
            question,
            asked,
            {"type": "mcp_approval_response", "approval_request_id": asked["id"], "approve": True},
        ]
        connection.response.create(model="sim-model", input=answering, tools=ALWAYS)
        second = until_done(connection)
        # Sent again, the same approval is a replay: a 400 naming it, the socket goes on.
        connection.response.create(model="sim-model", input=answering, tools=ALWAYS)
        (replayed,) = until_done(connection)
        assert replayed.type == "error" and replayed.status == 400
        assert "answered already" in replayed.error.message
        assert asked["id"] in replayed.error.message
    assert second[-1].type == "response.completed", second[-1]
    assert numbered(second)
    answered = second[-1].response
    assert [item.type for item in answered.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert answered.output[1].output == "8" and answered.output_text == "Tool result: 8"


def test_a_socket_closed_during_a_call_closes_the_mcp_session(socket_client, zdr, mcp_server):
    def stats() -> dict[str, int]:
        return httpx.get(mcp_server.url + "/stats", timeout=10).json()

    before = stats()
    with socket_client.responses.connect(extra_headers=BETA) as connection:
        connection.response.create(
            model="sim-model", input='[[call:calc__sleep {"seconds": 30}]]', tools=NEVER
        )
        for event in connection:
            if event.type == "response.mcp_call_arguments.done":
                break
    # The client is gone: the response ends, and its session with it (the
    # server is told), long before the call would have.
    wait_for(lambda: stats()["deleted"] - before["deleted"] == 1, timeout=15)
    assert stats()["initialize"] - before["initialize"] == 1
    [row] = wait_rows(1, organisation=zdr.organisation)
    # The call was made, and the row counts it, cut short.
    assert (row.status, row.tool_calls, row.tool_errors) == (499, 1, 1)
    assert row.tool_log[0]["error"] == "The response ended first."
