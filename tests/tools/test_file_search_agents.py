"""The OpenAI Agents SDK's ``FileSearchTool``, unchanged, against
Switchyard on a model the simulator scripts: the gateway searches the
organisation's vector store and the agent gets the model's answer, the
search in its run items and the answer's citation on the right file."""

from __future__ import annotations

import asyncio

import pytest
from agents import (
    Agent,
    FileSearchTool,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.tools.files import TRAVEL

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_file_search_tool_runs_for_an_agent(api_server, store, acme):
    set_tracing_disabled(True)

    async def run():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        agent = Agent(
            name="Clerk",
            instructions="Search the handbook, then answer with citations.",
            model=OpenAIResponsesModel(model="sim-model", openai_client=client),
            tools=[
                FileSearchTool(
                    vector_store_ids=[store.store_id],
                    max_num_results=2,
                    include_search_results=True,
                )
            ],
        )
        result = await Runner.run(
            agent,
            'What do travel expenses need? [[call:file_search {"query": "travel receipt"}]] '
            "[[answer:A receipt and a manager's approval [1].]]",
            run_config=RunConfig(tracing_disabled=True),
        )
        await client.close()
        return result

    result = asyncio.run(run())
    assert result.final_output == "A receipt and a manager's approval [1]."
    raw = [item.raw_item for item in result.new_items]
    searches = [item for item in raw if getattr(item, "type", None) == "file_search_call"]
    assert [(s.status, s.queries) for s in searches] == [("completed", ["travel receipt"])]
    assert searches[0].results[0].file_id == "file-travel"
    assert searches[0].results[0].text == TRAVEL
    message = next(item for item in raw if getattr(item, "type", None) == "message")
    [citation] = message.content[0].annotations
    assert (citation.type, citation.file_id, citation.filename) == (
        "file_citation",
        "file-travel",
        "travel.md",
    )
