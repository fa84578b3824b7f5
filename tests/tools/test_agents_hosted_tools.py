"""An OpenAI Agents SDK program written for OpenAI's hosted tools, unchanged,
against Switchyard on a model the simulator scripts: one agent offered an
MCP server whose calls need approval (``HostedMCPTool`` with its
``on_approval_request`` callback) and web search (``WebSearchTool``). The
gateway runs the search at once, asks the program to approve the MCP call,
runs it once approved, and the agent gets the model's answer."""

from __future__ import annotations

import asyncio

import pytest
from agents import (
    Agent,
    HostedMCPTool,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    WebSearchTool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.catalogue.services.web_search import web_search_bind
from tests.conftest import wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_an_agent_with_hosted_mcp_needing_approval_and_web_search(
    api_server, mcp_server, search_api, acme, people
):
    mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="calc",
        server_url=mcp_server.url + "/mcp",
        require_approval="always",
        allow_private=True,
    )
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )
    set_tracing_disabled(True)
    asked: list[tuple[str, str]] = []

    def approve(request):
        asked.append((request.data.server_label, request.data.name))
        return {"approve": True}

    async def run():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        agent = Agent(
            name="Researcher",
            instructions="Search, compute, then answer.",
            model=OpenAIResponsesModel(model="sim-model", openai_client=client),
            tools=[
                WebSearchTool(search_context_size="low"),
                HostedMCPTool(
                    tool_config={
                        "type": "mcp",
                        "server_label": "calc",
                        "require_approval": "always",
                    },
                    on_approval_request=approve,
                ),
            ],
        )
        result = await Runner.run(
            agent,
            'How tall, doubled? [[call:web_search {"query": "eiffel tower"}]] '
            '[[call:calc__add {"a": 330, "b": 330}]]',
            run_config=RunConfig(tracing_disabled=True),
        )
        await client.close()
        return result

    result = asyncio.run(run())
    assert asked == [("calc", "add")]
    raw = [item.raw_item for item in result.new_items]
    kinds = [getattr(item, "type", None) for item in raw]
    assert "web_search_call" in kinds and "mcp_approval_request" in kinds
    [call] = [item for item in raw if getattr(item, "type", None) == "mcp_call"]
    assert (call.name, call.output, call.error) == ("add", "660", None)
    assert "660" in result.final_output
    # Two requests (the approval's answer is the second), a row each.
    rows = wait_rows(2, timeout=10, organisation=people["acme"])
    assert len(rows) == 2 and all(row.status == 200 for row in rows)
    assert sum(row.tool_calls for row in rows) == 2  # the search, then the approved call
