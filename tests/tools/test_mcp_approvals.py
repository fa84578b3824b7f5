"""Approvals: a call that needs the client's approval ends the response as
an ``mcp_approval_request``; the next request's ``mcp_approval_response``
runs it (or tells the model it was denied). An approval answers only a
request this server made, for exactly that call, and only once; an
organisation that stores nothing re-sends the items and needs nothing kept."""

from __future__ import annotations

import pytest
from openai import BadRequestError, OpenAI
from openai.types.responses.mcp_tool_call_error import McpProtocolError

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create

pytestmark = pytest.mark.django_db(transaction=True)

ASKING = [{"type": "mcp", "server_label": "calc", "require_approval": "always"}]


def register(people, slug: str, url: str) -> None:
    mcp_server_create(
        organisation=people[slug],
        actor=CLI,
        label="calc",
        server_url=url + "/mcp",
        require_approval="always",
        allow_private=True,
    )


@pytest.fixture
def calc(mcp_server, acme, people):
    register(people, "acme", mcp_server.url)


def ask(client: OpenAI):
    return client.responses.create(
        model="sim-model", input='[[call:calc__add {"a": 2, "b": 3}]]', tools=ASKING
    )


def approval(request_id: str, approve: bool = True, **more):
    return {
        "type": "mcp_approval_response",
        "approval_request_id": request_id,
        "approve": approve,
        **more,
    }


def test_a_call_waits_for_approval_then_runs_once_approved(client: OpenAI, calc):
    first = ask(client)
    assert [item.type for item in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    asked = first.output[1]
    assert (asked.server_label, asked.name) == ("calc", "add")
    assert asked.id.startswith("mcpr_") and first.status == "completed"

    second = client.responses.create(
        model="sim-model",
        previous_response_id=first.id,
        input=[approval(asked.id)],
        tools=ASKING,
    )
    called = second.output[1]
    assert called.type == "mcp_call"
    assert (called.output, called.approval_request_id) == ("5", asked.id)
    assert second.output_text == "Tool result: 5"

    # The same approval again is a replay: refused, naming it.
    with pytest.raises(BadRequestError) as replayed:
        client.responses.create(
            model="sim-model",
            previous_response_id=first.id,
            input=[approval(asked.id)],
            tools=ASKING,
        )
    assert "answered already" in replayed.value.body["message"]
    assert replayed.value.body["param"] == "input"
    assert asked.id in replayed.value.body["message"]
    # Streamed, it is the same 400, before any event: no stream that fails.
    with pytest.raises(BadRequestError) as streamed:
        client.responses.create(
            model="sim-model",
            previous_response_id=first.id,
            input=[approval(asked.id)],
            tools=ASKING,
            stream=True,
        )
    assert "answered already" in streamed.value.body["message"]


def test_a_denied_call_is_told_to_the_model(client: OpenAI, calc):
    first = ask(client)
    second = client.responses.create(
        model="sim-model",
        previous_response_id=first.id,
        input=[approval(first.output[1].id, approve=False, reason="not today")],
        tools=ASKING,
    )
    called = second.output[1]
    assert called.output is None and called.error == McpProtocolError(
        type="mcp_protocol_error", code=-32000, message="The call was not approved: not today"
    )
    assert (
        second.output_text
        == "Tool result: The tool call failed: The call was not approved: not today"
    )


def test_an_organisation_that_stores_nothing_resends_the_items(
    gateway, mcp_server, initech, people
):
    register(people, "initech", mcp_server.url)
    client = gateway.openai(initech.key)
    question = {"role": "user", "content": '[[call:calc__add {"a": 4, "b": 4}]]'}
    first = client.responses.create(model="sim-model", input=[question], tools=ASKING)
    asked = first.output[1].model_dump(exclude_none=True)
    second = client.responses.create(
        model="sim-model", input=[question, asked, approval(asked["id"])], tools=ASKING
    )
    assert second.output[1].output == "8"

    # Altered arguments, or a request this server never made, answer nothing.
    for forged in (
        {**asked, "arguments": '{"a": 400, "b": 4}'},
        {**asked, "id": "mcpr_" + "0" * 48},
    ):
        with pytest.raises(BadRequestError) as refused:
            client.responses.create(
                model="sim-model",
                input=[question, forged, approval(forged["id"])],
                tools=ASKING,
            )
        assert "no approval request of this server" in refused.value.body["message"]


def test_another_organisations_approval_request_is_no_request(
    gateway, mcp_server, client: OpenAI, calc, initech, people
):
    register(people, "initech", mcp_server.url)
    asked = ask(client).output[1].model_dump(exclude_none=True)
    question = {"role": "user", "content": "go on"}
    with pytest.raises(BadRequestError):
        gateway.openai(initech.key).responses.create(
            model="sim-model", input=[question, asked, approval(asked["id"])], tools=ASKING
        )
