"""The OpenAI Agents SDK keeps a session in a conversation
(``OpenAIConversationsSession``) and runs two turns on it, and a run can
name the conversation itself (``conversation_id``)."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, set_tracing_disabled
from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_two_turns_of_a_conversations_session(api_server, acme, recorder):
    set_tracing_disabled(True)

    async def run():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        model = OpenAIResponsesModel(model="sim-model", openai_client=client)
        agent = Agent(name="Greeter", instructions="Remember names.", model=model)
        session = OpenAIConversationsSession(openai_client=client)
        config = RunConfig(tracing_disabled=True)
        first = await Runner.run(
            agent, "[[text:Hello, Ada.]] I am Ada.", session=session, run_config=config
        )
        second = await Runner.run(
            agent, "[[text:You are Ada.]] Who am I?", session=session, run_config=config
        )
        history = await session.get_items()
        last = await session.pop_item()
        after_pop = await session.get_items()
        conversation_id = session.session_id
        await session.clear_session()
        listed_after_clear = None
        try:
            await client.conversations.retrieve(conversation_id)
        except Exception as error:  # the SDK's NotFoundError
            listed_after_clear = type(error).__name__
        await client.close()
        return first, second, history, last, after_pop, conversation_id, listed_after_clear

    first, second, history, last, after_pop, conversation_id, gone = asyncio.run(run())
    assert first.final_output == "Hello, Ada."
    assert second.final_output == "You are Ada."
    assert conversation_id.startswith("conv_")
    # The second turn's request carried the first turn, read back from the conversation.
    sent = recorder.last_messages()
    assert [(m["role"], m["content"]) for m in sent] == [
        ("system", "Remember names."),
        ("user", "[[text:Hello, Ada.]] I am Ada."),
        ("assistant", "Hello, Ada."),
        ("user", "[[text:You are Ada.]] Who am I?"),
    ]
    assert [item.get("role") for item in history] == ["user", "assistant", "user", "assistant"]
    assert last is not None and last["content"][0]["text"] == "You are Ada."
    assert len(after_pop) == 3
    assert gone == "NotFoundError"


def test_a_run_in_a_named_conversation(api_server, acme, recorder):
    set_tracing_disabled(True)

    async def run():
        client = AsyncOpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0)
        model = OpenAIResponsesModel(model="sim-model", openai_client=client)
        agent = Agent(name="Greeter", instructions="Remember names.", model=model)
        conversation = await client.conversations.create()
        config = RunConfig(tracing_disabled=True)
        first = await Runner.run(
            agent, "[[text:Hi Bo.]] I am Bo.", conversation_id=conversation.id, run_config=config
        )
        second = await Runner.run(
            agent, "[[text:Bo.]] Name?", conversation_id=conversation.id, run_config=config
        )
        items = [item async for item in client.conversations.items.list(conversation.id)]
        await client.close()
        return first, second, items

    first, second, items = asyncio.run(run())
    assert (first.final_output, second.final_output) == ("Hi Bo.", "Bo.")
    sent = recorder.last_messages()
    assert [m["content"] for m in sent[1:]] == [
        "[[text:Hi Bo.]] I am Bo.",
        "Hi Bo.",
        "[[text:Bo.]] Name?",
    ]
    assert len(items) == 4
