"""An ``mcp_call`` that failed carries OpenAI's error object, one of three
kinds, end to end through the OpenAI SDK: the parsed ``error`` is the SDK's
model of that kind and dumps without a serializer warning, the model reads
its text, and the usage row keeps the sentence. A client's input item with
an older string error is still read."""

from __future__ import annotations

import asyncio
import time
import warnings

import pytest
from openai import OpenAI
from openai.types.responses.mcp_tool_call_error import (
    HTTPError,
    McpProtocolError,
    McpToolExecutionError,
)

from responses_api.catalogue.addresses import backend_policy
from responses_api.catalogue.mcp_resolve import ResolvedMcpServer
from responses_api.pipeline.mcp_calls import Hosted, Offer, _called
from responses_api.translate.items import Item
from responses_api.translate.tool_turns import ListedTool
from tests.conftest import usage_rows, wait_for
from tests.tools.test_mcp_loop_hostile import MCP, register

pytestmark = pytest.mark.django_db(transaction=True)

ADD = '[[call:calc__add {"a": 2, "b": 3}]]'


def failed_call(client: OpenAI, prompt: str, **extra):
    """The response's one failed call, checked for its shape."""
    response = client.responses.create(model="sim-model", input=prompt, tools=MCP, **extra)
    [called] = [item for item in response.output if item.type == "mcp_call" and item.output is None]
    assert called.status == "failed" and called.output is None
    assert response.status == "completed"
    # The SDK's model of the item is the wire's shape: no serializer warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dumped = response.model_dump()
        called.model_dump_json()
    [item] = [item for item in dumped["output"] if item["type"] == "mcp_call"]
    assert item["error"] == called.error.model_dump()
    return response, called


def test_a_tool_that_reports_an_error_is_an_execution_error(client: OpenAI, mcp_server, people):
    register(people, mcp_server.url + "/mcp")
    response, called = failed_call(client, '[[call:calc__fail {"reason": "out of paper"}]]')
    assert isinstance(called.error, McpToolExecutionError)
    [block] = called.error.content
    assert block["type"] == "text" and "failed on purpose: out of paper" in block["text"]
    assert response.output_text == f"Tool result: The tool call failed: {block['text']}"
    [row] = wait_for(lambda: usage_rows(model="sim-model"), timeout=10)
    assert row.tool_log[0]["error"] == block["text"]


def test_a_json_rpc_error_is_a_protocol_error_with_the_servers_code(
    client: OpenAI, hostile_mcp, people
):
    register(people, f"{hostile_mcp.url}/call-rpc-error/mcp")
    response, called = failed_call(client, ADD)
    assert isinstance(called.error, McpProtocolError)
    assert called.error.code == -32602
    message = "The MCP server answered with an error: no such city: Atlantis"
    assert called.error.message == message
    assert response.output_text == f"Tool result: The tool call failed: {message}"
    [row] = wait_for(lambda: usage_rows(model="sim-model"), timeout=10)
    assert row.tool_log[0]["error"] == message


def test_a_json_rpc_code_past_32_bits_is_an_answer_not_understood(
    client: OpenAI, hostile_mcp, people
):
    register(people, f"{hostile_mcp.url}/call-rpc-error-huge/mcp")
    response, called = failed_call(client, ADD)
    assert response.status == "completed"
    assert isinstance(called.error, McpProtocolError) and called.error.code == -32000


def test_an_http_error_status_is_an_http_error(client: OpenAI, hostile_mcp, people):
    register(people, f"{hostile_mcp.url}/call-html-500/mcp")
    _, called = failed_call(client, ADD)
    assert isinstance(called.error, HTTPError)
    assert (called.error.code, called.error.message) == (500, "The MCP server answered HTTP 500.")


def test_a_call_that_times_out_is_a_request_timeout(client: OpenAI, hostile_mcp, people, settings):
    settings.SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS = 1.0
    register(people, f"{hostile_mcp.url}/call-hang/mcp")
    _, called = failed_call(client, ADD)
    assert isinstance(called.error, McpProtocolError)
    assert called.error.code == -32001
    assert "did not answer within 1 seconds" in called.error.message


@pytest.mark.parametrize("behaviour", ["garbage", "not-jsonrpc", "drop"])
def test_an_answer_not_understood_is_a_protocol_error(
    behaviour, client: OpenAI, hostile_mcp, people
):
    register(people, f"{hostile_mcp.url}/call-{behaviour}/mcp")
    _, called = failed_call(client, ADD)
    assert isinstance(called.error, McpProtocolError)
    assert called.error.code == -32000


def test_a_call_the_gateway_does_not_run_is_a_protocol_error(
    client: OpenAI, mcp_server, people, settings
):
    settings.SWITCHYARD_MCP_MAX_TURNS = 1
    register(people, mcp_server.url + "/mcp")
    _, called = failed_call(client, ADD)
    assert isinstance(called.error, McpProtocolError)
    assert called.error.code == -32000
    assert "SWITCHYARD_MCP_MAX_TURNS" in called.error.message


def test_a_streamed_failed_call_carries_the_error_object(client: OpenAI, mcp_server, people):
    register(people, mcp_server.url + "/mcp")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        events = list(
            client.responses.create(
                model="sim-model",
                input='[[call:calc__fail {"reason": "jammed"}]]',
                tools=MCP,
                stream=True,
            )
        )
        for event in events:
            event.model_dump()
    [done] = [
        event
        for event in events
        if event.type == "response.output_item.done" and event.item.type == "mcp_call"
    ]
    assert isinstance(done.item.error, McpToolExecutionError)
    assert "jammed" in done.item.error.content[0]["text"]
    assert "response.mcp_call.failed" in [event.type for event in events]
    [final] = [event.response for event in events if event.type == "response.completed"]
    [stored] = [item for item in final.output if item.type == "mcp_call"]
    assert stored.error == done.item.error
    # Stored, it comes back the same, and continues a chain the model reads.
    again = client.responses.retrieve(final.id)
    assert [item for item in again.output if item.type == "mcp_call"][0].error == stored.error
    follow = client.responses.create(
        model="sim-model", input="and?", previous_response_id=final.id, tools=MCP
    )
    assert follow.status == "completed"


@pytest.mark.parametrize(
    ("error", "read"),
    [
        ("boom", "boom"),
        ({"type": "mcp_protocol_error", "code": -32000, "message": "gone"}, "gone"),
        (
            {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "jam"}]},
            "jam",
        ),
        ({"type": "http_error", "code": 502, "message": "bad gateway"}, "bad gateway"),
    ],
)
def test_an_input_mcp_call_with_either_error_shape_is_read(client: OpenAI, acme, error, read):
    response = client.responses.create(
        model="sim-model",
        input=[
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "server_label": "calc",
                "name": "add",
                "arguments": "{}",
                "error": error,
            }
        ],
    )
    assert response.output_text == f"Tool result: The tool call failed: {read}"


def _hosted():
    server = ResolvedMcpServer(
        label="calc",
        server_url="http://127.0.0.1:9/mcp",
        transport="streamable_http",
        headers={},
        authorization="",
        allowed_tools=None,
        read_only=False,
        require_approval="never",
        approval_exceptions=frozenset(),
        policy=backend_policy(allow_private=True),
        registered=True,
    )
    return Hosted((Offer(server, (ListedTool("add", "", {"type": "object"}),)),))


@pytest.mark.parametrize(
    ("name", "arguments", "late", "code", "message"),
    [
        ("nope", "{}", False, -32602, "The tool 'nope' is not offered by this server."),
        ("add", "{", False, -32602, "The call's arguments are not valid JSON."),
        ("add", "[1]", False, -32602, "The call's arguments must be a JSON object."),
        ("add", "{}", True, -32001, "The response's time for tool calls is over."),
    ],
)
def test_a_call_the_gateway_refuses_is_a_protocol_error_never_sent(
    name, arguments, late, code, message
):
    item = Item("mcp_call", 0, "mcp_1", closed=True)
    item.done_item = {
        "id": "mcp_1",
        "type": "mcp_call",
        "status": "calling",
        "server_label": "calc",
        "name": name,
        "arguments": arguments,
        "output": None,
        "error": None,
    }
    deadline = time.monotonic() + (-1 if late else 60)
    events = asyncio.run(_called(_hosted(), item, deadline))
    assert events[0]["type"] == "response.mcp_call.failed"
    done = events[-1]["item"]
    assert done["status"] == "failed" and done["output"] is None
    assert done["error"] == {"type": "mcp_protocol_error", "code": code, "message": message}
