"""The OpenAI SDK's streaming helper (``client.responses.stream``) on the
tool loop's events: it accepts every event (its state checks each item's
identity from ``output_item.added`` to ``done`` and the final response),
and what it accumulates is the response a non-streamed request gets: the
same items, statuses, outputs and annotations, for an MCP call, an approval
request and its answer, and a web search."""

from __future__ import annotations

from typing import Any

import pytest
from openai import OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.catalogue.services.web_search import web_search_bind

pytestmark = pytest.mark.django_db(transaction=True)

# What differs between two runs of the same request: its ids and times.
VARYING = {"id", "created_at", "completed_at", "approval_request_id", "previous_response_id"}


@pytest.fixture
def servers(mcp_server, search_api, acme, people):
    for label, approval in (("calc", "never"), ("gate", "always")):
        mcp_server_create(
            organisation=people["acme"],
            actor=CLI,
            label=label,
            server_url=mcp_server.url + "/mcp",
            transport="streamable_http",
            require_approval=approval,
            allow_private=True,
        )
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )


def comparable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def both(client: OpenAI, **body):
    """The request streamed through the helper, then not streamed: the
    helper's final response, the items its events completed, and the plain
    response."""
    with client.responses.stream(**body) as stream:
        events = list(stream)
        streamed = stream.get_final_response()
    done = {e.output_index: e.item for e in events if e.type == "response.output_item.done"}
    plain = client.responses.create(**body)
    return streamed, [done[i] for i in sorted(done)], plain


def same(streamed, done_items, plain) -> None:
    final = [item.model_dump(exclude_none=True) for item in streamed.output]
    # What the helper accumulated item by item is the final response's output.
    assert [item.model_dump(exclude_none=True) for item in done_items] == final
    assert comparable(final) == comparable(
        [item.model_dump(exclude_none=True) for item in plain.output]
    )
    assert (streamed.status, streamed.output_text) == (plain.status, plain.output_text)


def test_an_mcp_loop_streamed_is_the_response_not_streamed(client: OpenAI, servers):
    streamed, done, plain = both(
        client,
        model="sim-model",
        input='[[call:calc__add {"a": 2, "b": 3}]] [[call:calc__fail {"reason": "no"}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    same(streamed, done, plain)
    statuses = [getattr(item, "status", None) for item in streamed.output]
    assert [item.type for item in streamed.output] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
        "message",
    ]
    assert statuses[1:] == ["completed", "failed", "completed"]


def test_an_approval_request_and_its_answer_streamed(client: OpenAI, servers):
    tools = [{"type": "mcp", "server_label": "gate", "require_approval": "always"}]
    streamed, done, plain = both(
        client, model="sim-model", input='[[call:gate__add {"a": 1, "b": 2}]]', tools=tools
    )
    same(streamed, done, plain)
    assert [item.type for item in streamed.output] == ["mcp_list_tools", "mcp_approval_request"]
    # The answer, streamed.
    asked = streamed.output[1]
    with client.responses.stream(
        model="sim-model",
        previous_response_id=streamed.id,
        input=[{"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}],
        tools=tools,
    ) as stream:
        events = list(stream)
        answered = stream.get_final_response()
    done_items = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i.model_dump(exclude_none=True) for i in done_items] == [
        i.model_dump(exclude_none=True) for i in answered.output
    ]
    called = answered.output[1]
    assert (called.type, called.status, called.output) == ("mcp_call", "completed", "3")
    assert called.approval_request_id == asked.id
    assert answered.output_text == "Tool result: 3"


def test_a_search_streamed_is_the_response_not_streamed(client: OpenAI, servers):
    streamed, done, plain = both(
        client,
        model="sim-model",
        input='When? [[call:web_search {"query": "eiffel tower"}]] '
        "[[answer:It opened in 1889 [1], as https://news.example.com/eiffel-tower says.]]",
        tools=[{"type": "web_search"}],
    )
    same(streamed, done, plain)
    message = streamed.output[-1]
    assert [a.type for a in message.content[0].annotations] == ["url_citation", "url_citation"]
    assert streamed.output[0].status == "completed"
