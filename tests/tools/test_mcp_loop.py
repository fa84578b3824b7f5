"""The tool loop end to end: the OpenAI SDK asks for a response with an MCP
tool, the simulator (the model) calls it, the gateway runs the call on a
real MCP server process and asks the model again, and the client gets one
response with the listing, the call and the answer, and one usage row."""

from __future__ import annotations

import pytest
from openai import BadRequestError, OpenAI
from openai.types.responses.mcp_tool_call_error import McpToolExecutionError

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.usage.trace import usage_row_dict
from tests.conftest import usage_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def calc(mcp_server, acme, people):
    """The MCP test server, registered by Acme as ``calc`` (on loopback:
    registered by platform staff, who may open a private address)."""
    return mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="calc",
        server_url=mcp_server.url + "/mcp",
        transport="streamable_http",
        require_approval="never",
        allow_private=True,
    )


def test_a_call_is_run_and_answered_in_one_response(client: OpenAI, calc, acme):
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input='Add them. [[call:calc__add {"a": 2, "b": 3}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    response = raw.parse()
    kinds = [item.type for item in response.output]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"]
    listed, called, message = response.output
    assert {"add", "echo"} <= {tool.name for tool in listed.tools}
    assert (called.server_label, called.name, called.output) == ("calc", "add", "5")
    assert called.error is None
    # The model read the tool's result (the simulator says what it read).
    assert response.output_text == "Tool result: 5"
    assert response.usage is not None and response.usage.output_tokens > 0
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert row.status == 200
    assert row.output_tokens == response.usage.output_tokens
    # The row counts the tool's call and the time spent in it, for the trace.
    assert (row.tool_calls, row.tool_errors) == (1, 0) and row.tool_ms > 0
    [logged] = row.tool_log
    assert logged == {
        "type": "mcp",
        "server": "calc",
        "name": "add",
        "status": "completed",
        "ms": logged["ms"],
    }
    assert usage_row_dict(row)["tools"] == {
        "calls": 1,
        "errors": 0,
        "ms": row.tool_ms,
        "log": [logged],
    }


def test_a_streamed_loop_is_one_stream_the_sdk_accumulates(client: OpenAI, calc):
    with client.responses.stream(
        model="sim-model",
        input='Echo it. [[call:calc__echo {"text": "over the wire"}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created"
    assert "response.mcp_list_tools.completed" in kinds
    assert "response.mcp_call_arguments.done" in kinds
    assert "response.mcp_call.completed" in kinds
    assert kinds[-1] == "response.completed"
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert final.output[1].output == "over the wire"
    assert final.output_text == "Tool result: over the wire"


def test_a_failing_tool_is_told_to_the_model_not_the_end_of_the_response(client: OpenAI, calc):
    response = client.responses.create(
        model="sim-model",
        input='Try it. [[call:calc__fail {"reason": "out of paper"}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    called = response.output[1]
    assert called.type == "mcp_call" and called.output is None
    assert isinstance(called.error, McpToolExecutionError)
    assert "out of paper" in called.error.content[0]["text"]
    assert response.status == "completed"
    assert response.output_text.startswith("Tool result: The tool call failed:")
    [row] = wait_for(lambda: usage_rows(model="sim-model"), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (1, 1)
    [logged] = row.tool_log
    assert logged["status"] == "failed" and "out of paper" in logged["error"]


def test_the_trace_page_lists_each_call_with_its_status_and_time(client: OpenAI, calc, people):
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input='[[call:calc__add {"a": 1, "b": 2}]] [[call:calc__fail {"reason": "jammed"}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    console = Client()
    console.force_login(get_user_model().objects.get(email="alice@example.com"))
    page = console.get(reverse("console:trace", args=[row.request_id])).content.decode()
    calls = page.split('id="trace-tool-calls"', 1)[1].split("</section>", 1)[0]
    assert calls.count("<tr>") == 3  # the header, then a row per call
    assert "<code>add</code>" in calls and "<code>fail</code>" in calls
    assert "completed" in calls and "failed" in calls and "jammed" in calls


def test_allowed_tools_narrow_what_the_model_is_offered(client: OpenAI, calc):
    response = client.responses.create(
        model="sim-model",
        input='[[call:calc__add {"a": 1, "b": 1}]]',
        tools=[
            {
                "type": "mcp",
                "server_label": "calc",
                "require_approval": "never",
                "allowed_tools": ["echo"],
            }
        ],
    )
    listed = response.output[0]
    assert [tool.name for tool in listed.tools] == ["echo"]
    # Not offered, so the model could not call it: it answers instead.
    assert [item.type for item in response.output] == ["mcp_list_tools", "message"]


def test_another_organisations_server_is_an_unknown_label(gateway, calc, globex):
    with pytest.raises(BadRequestError) as refused:
        gateway.openai(globex.key).responses.create(
            model="sim-model",
            input="hi",
            tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
        )
    assert refused.value.body["code"] == "unknown_server_label"
    assert refused.value.body["param"] == "tools[0].server_label"


def test_a_history_with_an_mcp_call_continues(client: OpenAI, calc):
    first = client.responses.create(
        model="sim-model",
        input='[[call:calc__add {"a": 20, "b": 22}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    second = client.responses.create(
        model="sim-model",
        previous_response_id=first.id,
        input="[[text:forty-two it is]]",
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    assert second.output_text == "forty-two it is"
    assert not any(n["code"] == "hosted_items_skipped" for n in second.switchyard["notices"])


def test_each_turn_of_the_loop_holds_its_spend_and_a_spent_budget_stops_it(
    gateway, calc, acme, people
):
    """Admission holds the first backend call's worst case; the loop's next
    call holds its own before it starts, so a budget that the first hold
    already covers stops the loop with the budget's 429 (the OpenAI SDK
    retries none), one row counting the turn that ran, and no hold left."""
    from decimal import Decimal

    from openai import RateLimitError

    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.served_models import model_ensure
    from responses_api.runtime import redis_conn
    from responses_api.usage.holds import local_holds

    # Output at 0.25 per token: a turn of at most 16 tokens holds 4.00.
    model_ensure(
        organisation=people["acme"],
        public_id="sim-model",
        backend=acme.backend,
        price_input=Decimal(0),
        price_cached_input=Decimal(0),
        price_output=Decimal(250_000),
    )
    _, key = api_key_create(
        organisation=people["acme"], name="tight", monthly_budget=Decimal("1.00")
    )
    client = gateway.openai(key)
    asked = {
        "model": "sim-model",
        "input": 'Add them. [[call:calc__add {"a": 2, "b": 3}]]',
        "tools": [{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
        "max_output_tokens": 16,
    }
    with pytest.raises(RateLimitError) as refused:
        client.responses.with_raw_response.create(**asked)
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "insufficient_quota"
    request_id = refused.value.response.headers["x-request-id"]
    [row] = wait_for(lambda: usage_rows(request_id=request_id), timeout=10)
    assert (row.status, row.error_code, row.tool_calls) == (429, "insufficient_quota", 1)
    assert row.output_tokens > 0 and row.cost > 0  # the turn that ran is paid for
    if not redis_conn.enabled():
        assert local_holds.held == {}  # the row gave the grown hold back

    # Streamed, the refusal ends the stream that had started.
    with client.responses.stream(**asked) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] in {"response.failed", "error"}
