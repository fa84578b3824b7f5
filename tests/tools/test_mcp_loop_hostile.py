"""The tool loop under hostile MCP servers: a server that hangs, answers
50 MB, answers what is no JSON-RPC or drops the connection ends the request
cleanly, with one usage row, within its bound; a tool that hangs or answers
too much fails its call, not the response; and another organisation is
served meanwhile."""

from __future__ import annotations

import concurrent.futures
import time

import pytest
from openai import APIStatusError, OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from tests.conftest import usage_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MCP = [{"type": "mcp", "server_label": "calc", "require_approval": "never"}]


def register(people, url: str):
    return mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="calc",
        server_url=url,
        transport="streamable_http",
        require_approval="never",
        allow_private=True,
    )


@pytest.mark.parametrize("behaviour", ["hang", "huge", "garbage", "not-jsonrpc", "drop"])
def test_a_server_that_cannot_list_fails_the_request_with_a_424_and_its_row(
    behaviour, hostile_mcp, client: OpenAI, acme, people, settings
):
    settings.SWITCHYARD_MCP_LIST_TIMEOUT_SECONDS = 2.0
    register(people, f"{hostile_mcp.url}/{behaviour}/mcp")
    started = time.monotonic()
    with pytest.raises(APIStatusError) as failed:
        client.with_options(max_retries=0).responses.create(
            model="sim-model", input="hi", tools=MCP
        )
    assert time.monotonic() - started < 10
    error = failed.value
    assert error.status_code == 424
    assert error.body["type"] == "external_connector_error"
    assert "calc" in error.body["message"]
    request_id = error.response.headers["x-request-id"]
    [row] = wait_for(lambda: usage_rows(request_id=request_id), timeout=10)
    assert row.status == 424


def test_a_call_that_hangs_fails_at_its_timeout_and_the_model_answers(
    mcp_server, client: OpenAI, people, settings
):
    settings.SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS = 1.0
    register(people, mcp_server.url + "/mcp")
    started = time.monotonic()
    response = client.responses.create(
        model="sim-model", input='[[call:calc__sleep {"seconds": 30}]]', tools=MCP
    )
    assert time.monotonic() - started < 10
    called = response.output[1]
    assert called.type == "mcp_call" and called.output is None and called.error
    assert response.status == "completed"


def test_an_answer_past_the_output_cap_is_cut_and_a_far_larger_one_aborted(
    mcp_server, client: OpenAI, people, settings
):
    settings.SWITCHYARD_MCP_OUTPUT_BYTES = 1000
    register(people, mcp_server.url + "/mcp")
    response = client.responses.create(
        model="sim-model", input='[[call:calc__big {"size": 100000}]]', tools=MCP
    )
    called = response.output[1]
    assert called.output is not None and len(called.output.encode()) < 2000
    assert called.output.startswith("x" * 900)
    # Past what its output could need on the wire, the answer is not read on.
    response = client.responses.create(
        model="sim-model", input='[[call:calc__big {"size": 5000000}]]', tools=MCP
    )
    called = response.output[1]
    assert called.status == "failed" and called.error.type == "mcp_protocol_error"
    assert "exceeded" in called.error.message and called.error.code == -32000
    assert response.status == "completed"


def test_another_organisation_is_served_while_a_tool_hangs(
    mcp_server, gateway, client: OpenAI, globex, people, settings
):
    settings.SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS = 5.0
    register(people, mcp_server.url + "/mcp")
    other = gateway.openai(globex.key)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        hanging = pool.submit(
            client.responses.create,
            model="sim-model",
            input='[[call:calc__sleep {"seconds": 30}]]',
            tools=MCP,
        )
        time.sleep(0.5)
        started = time.monotonic()
        answer = other.responses.create(model="sim-model", input="[[text:still here]]")
        assert time.monotonic() - started < 2
        assert answer.output_text == "still here"
        assert not hanging.done()
        assert hanging.result(timeout=30).status == "completed"
