"""The OpenAI Agents SDK continues a stored conversation with
``previous_response_id``, a function tool's loop included."""

from __future__ import annotations

import asyncio

import pytest
from agents import (
    Agent,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_runner_run_continues_from_a_stored_response(api_server, acme, recorder):
    set_tracing_disabled(True)

    async def conversation():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        model = OpenAIResponsesModel(model="sim-model", openai_client=client)
        agent = Agent(
            name="Forecaster", instructions="Use the tool.", model=model, tools=[get_weather]
        )
        config = RunConfig(tracing_disabled=True)
        first = await Runner.run(agent, "[[text:Hello, I forecast.]] Hi", run_config=config)
        second = await Runner.run(
            agent,
            'Weather? [[call:get_weather {"city": "Paris"}]]',
            previous_response_id=first.last_response_id,
            run_config=config,
        )
        await client.close()
        return first, second

    first, second = asyncio.run(conversation())
    assert first.final_output == "Hello, I forecast."
    assert second.final_output == "Tool result: sunny in Paris"
    # The tool loop's last request sent only the tool's output, continuing
    # the chain: the backend still got the whole conversation.
    sent = recorder.last_messages()
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert sent[1]["content"] == "[[text:Hello, I forecast.]] Hi"
    assert sent[5]["content"] == "sunny in Paris"
