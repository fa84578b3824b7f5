"""The OpenAI Agents SDK's ``WebSearchTool``, unchanged, against Switchyard
on a model the simulator scripts: the gateway runs the search on the
organisation's provider (a real HTTP process) and the agent gets the
model's answer, the search in its run items."""

from __future__ import annotations

import asyncio

import pytest
from agents import (
    Agent,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    WebSearchTool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.web_search import web_search_bind

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_web_search_tool_runs_for_an_agent(api_server, search_api, acme, people):
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )
    set_tracing_disabled(True)

    async def run():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        agent = Agent(
            name="Researcher",
            instructions="Search, then answer with citations.",
            model=OpenAIResponsesModel(model="sim-model", openai_client=client),
            tools=[WebSearchTool(search_context_size="low")],
        )
        result = await Runner.run(
            agent,
            'Who built it? [[call:web_search {"query": "eiffel tower"}]] '
            "[[answer:Gustave Eiffel's company built it [1].]]",
            run_config=RunConfig(tracing_disabled=True),
        )
        await client.close()
        return result

    result = asyncio.run(run())
    assert result.final_output == "Gustave Eiffel's company built it [1]."
    raw = [item.raw_item for item in result.new_items]
    searches = [item for item in raw if getattr(item, "type", None) == "web_search_call"]
    assert [(s.status, s.action.query) for s in searches] == [("completed", "eiffel tower")]
    message = next(item for item in raw if getattr(item, "type", None) == "message")
    [citation] = message.content[0].annotations
    assert citation.url == "https://en.example.org/wiki/eiffel-tower"


def test_an_agent_s_model_may_open_a_page_it_found(
    api_server, search_api, page_server, acme, people
):
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )
    set_tracing_disabled(True)
    url = page_server.url + "/article"

    async def run():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        agent = Agent(
            name="Reader",
            instructions="Read the page, then answer with citations.",
            model=OpenAIResponsesModel(model="sim-model", openai_client=client),
            tools=[WebSearchTool()],
        )
        result = await Runner.run(
            agent,
            f'[[call:find_in_page {{"url": "{url}", "pattern": "metres"}}]] '
            "[[answer:It is 330 metres tall [1].]]",
            run_config=RunConfig(tracing_disabled=True),
        )
        await client.close()
        return result

    result = asyncio.run(run())
    assert result.final_output == "It is 330 metres tall [1]."
    raw = [item.raw_item for item in result.new_items]
    [found] = [item for item in raw if getattr(item, "type", None) == "web_search_call"]
    assert (found.status, found.action.type, found.action.url) == ("completed", "find_in_page", url)
    assert found.action.pattern == "metres"
    message = next(item for item in raw if getattr(item, "type", None) == "message")
    [citation] = message.content[0].annotations
    assert (citation.url, citation.title) == (url, "The Eiffel Tower")
