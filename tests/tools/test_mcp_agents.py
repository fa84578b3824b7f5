"""The OpenAI Agents SDK's ``HostedMCPTool``, unchanged, against Switchyard
on a model the simulator scripts: the gateway runs the MCP call and the
agent gets the model's answer, the call in its run items."""

from __future__ import annotations

import asyncio

import pytest
from agents import (
    Agent,
    HostedMCPTool,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_hosted_mcp_tool_runs_for_an_agent(api_server, mcp_server, acme, people):
    mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="calc",
        server_url=mcp_server.url + "/mcp",
        require_approval="never",
        allow_private=True,
    )
    set_tracing_disabled(True)

    async def run():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        agent = Agent(
            name="Calculator",
            instructions="Use the calculator.",
            model=OpenAIResponsesModel(model="sim-model", openai_client=client),
            tools=[
                HostedMCPTool(
                    tool_config={
                        "type": "mcp",
                        "server_label": "calc",
                        "require_approval": "never",
                    }
                )
            ],
        )
        result = await Runner.run(
            agent,
            'Add 40 and 2. [[call:calc__add {"a": 40, "b": 2}]]',
            run_config=RunConfig(tracing_disabled=True),
        )
        await client.close()
        return result

    result = asyncio.run(run())
    assert result.final_output == "Tool result: 42"
    raw = [item.raw_item for item in result.new_items]
    calls = [item for item in raw if getattr(item, "type", None) == "mcp_call"]
    assert [(call.name, call.output) for call in calls] == [("add", "42")]
