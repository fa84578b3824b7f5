"""Web search end to end: the OpenAI SDK asks for a response with
``{"type": "web_search"}``, the simulator (the model) calls the search, the
gateway runs it on the organisation's provider (a real HTTP process
speaking SearXNG's, Brave's or Tavily's API, or a real MCP server's search
tool) and asks the model again, and the client gets one response with the
``web_search_call`` item and the answer, its citations annotated."""

from __future__ import annotations

import httpx
import pytest
from openai import BadRequestError, OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.catalogue.services.web_search import web_search_bind
from tests.conftest import usage_rows, wait_for
from tests.tools.servers.search_api import BRAVE_KEY, TAVILY_KEY

pytestmark = pytest.mark.django_db(transaction=True)

ASK = (
    'When did it open? [[call:web_search {"query": "eiffel tower"}]] '
    "[[answer:It opened in 1889 [1], as https://news.example.com/eiffel-tower says.]]"
)
ANSWER = "It opened in 1889 [1], as https://news.example.com/eiffel-tower says."


def bind(people, org="acme", **data):
    return web_search_bind(organisation=people[org], actor=CLI, data=data)


@pytest.fixture
def searxng(search_api, acme, people):
    return bind(people, kind="searxng", base_url=search_api.url, allow_private=True)


def test_a_search_runs_and_the_answer_cites_its_sources(client: OpenAI, searxng):
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input=ASK,
        tools=[{"type": "web_search"}],
        include=["web_search_call.action.sources"],
    )
    response = raw.parse()
    assert [item.type for item in response.output] == ["web_search_call", "message"]
    searched, message = response.output
    assert searched.id.startswith("ws_") and searched.status == "completed"
    assert searched.action.type == "search" and searched.action.query == "eiffel tower"
    assert [source.url for source in searched.action.sources] == [
        "https://en.example.org/wiki/eiffel-tower",
        "https://news.example.com/eiffel-tower",
        "https://blog.example.net/eiffel-tower",
    ]
    assert response.output_text == ANSWER
    marker = ANSWER.index("[1]")
    url = ANSWER.index("https://news")
    annotations = [a.model_dump() for a in message.content[0].annotations]
    assert annotations == [
        {
            "type": "url_citation",
            "start_index": marker,
            "end_index": marker + 3,
            "url": "https://en.example.org/wiki/eiffel-tower",
            "title": "eiffel tower - Encyclopedia",
        },
        {
            "type": "url_citation",
            "start_index": url,
            "end_index": url + len("https://news.example.com/eiffel-tower"),
            "url": "https://news.example.com/eiffel-tower",
            "title": "News on eiffel tower",
        },
    ]
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert row.status == 200
    assert (row.tool_calls, row.tool_errors) == (1, 0) and row.tool_ms > 0


def test_the_model_reads_the_results_numbered(client: OpenAI, searxng):
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "tides"}]]',
        tools=[{"type": "web_search_preview", "search_context_size": "low"}],
    )
    text = response.output_text
    assert text.startswith('Tool result: Web search results for "tides"')
    assert "[1] tides - Encyclopedia" in text and "URL: https://news.example.com/tides" in text
    # Sources are shown only when included.
    assert response.output[0].action.sources is None


def test_a_streamed_search_is_in_openai_s_order(client: OpenAI, searxng):
    with client.responses.stream(
        model="sim-model", input=ASK, tools=[{"type": "web_search"}]
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    searched = kinds.index("response.web_search_call.in_progress")
    assert kinds[:8] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    added = events[searched - 1]
    assert added.item.type == "web_search_call" and added.item.status == "in_progress"
    annotated = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert [e.annotation_index for e in annotated] == [0, 1]
    text_done = kinds.index("response.output_text.done")
    assert all(kinds.index(e.type) < text_done for e in annotated)
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(numbers)))
    assert [item.type for item in final.output] == ["web_search_call", "message"]
    assert len(final.output[1].content[0].annotations) == 2


def test_brave_search_gets_the_key_and_the_country(client: OpenAI, search_api, acme, people):
    bind(people, kind="brave", base_url=search_api.url, api_key=BRAVE_KEY, allow_private=True)
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "brave new query"}]]',
        tools=[
            {
                "type": "web_search_2025_08_26",
                "user_location": {"type": "approximate", "country": "fr", "city": "Paris"},
                "filters": {"allowed_domains": ["news.example.com"]},
            }
        ],
    )
    assert response.output[0].status == "completed"
    text = response.output_text
    # Only the allowed domain's result, tags taken out of Brave's snippet.
    assert "news.example.com" in text and "en.example.org" not in text
    assert "<strong>" not in text
    seen = httpx.get(search_api.url + "/stats").json()
    last = seen[-1]
    assert last["kind"] == "brave" and last["keyed"] is True
    assert last["params"]["country"] == "FR"
    assert "site:news.example.com" in last["params"]["q"]


def test_tavily_takes_the_key_as_a_bearer_token(client: OpenAI, search_api, acme, people):
    bind(people, kind="tavily", base_url=search_api.url, api_key=TAVILY_KEY, allow_private=True)
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "tavily"}]]',
        tools=[{"type": "web_search"}],
    )
    assert response.output[0].status == "completed"
    assert "https://blog.example.net/tavily" in response.output_text


def test_a_wrong_key_fails_the_search_not_the_response(client: OpenAI, search_api, people, acme):
    bind(people, kind="brave", base_url=search_api.url, api_key="wrong", allow_private=True)
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "anything"}]]',
        tools=[{"type": "web_search"}],
    )
    assert response.status == "completed"
    assert response.output[0].status == "failed"
    assert "HTTP status 401" in response.output_text
    assert "wrong" not in response.output_text


def test_an_mcp_server_s_tool_can_be_the_provider(client: OpenAI, mcp_server, acme, people):
    mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="index",
        server_url=mcp_server.url + "/mcp",
        transport="streamable_http",
        require_approval="never",
        allow_private=True,
    )
    bind(people, kind="mcp", mcp_server_label="index", mcp_tool="search")
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "rate limits"}]] [[answer:See [2] and [9].]]',
        tools=[{"type": "web_search"}],
        include=["web_search_call.action.sources"],
    )
    searched = response.output[0]
    assert searched.type == "web_search_call" and searched.status == "completed"
    assert [s.url for s in searched.action.sources] == [
        "https://docs.example.io/rate-limits",
        "https://forum.example.io/rate-limits",
    ]
    # [9] is no source: only [2] is cited.
    [citation] = response.output[1].content[0].annotations
    assert citation.url == "https://forum.example.io/rate-limits"
    assert response.output_text[citation.start_index : citation.end_index] == "[2]"


def test_a_search_in_the_history_is_given_back_to_the_model(client: OpenAI, searxng, recorder):
    first = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "moon landing"}]]',
        tools=[{"type": "web_search"}],
        include=["web_search_call.action.sources"],
    )
    second = client.responses.create(
        model="sim-model",
        previous_response_id=first.id,
        input="[[text:noted]]",
        tools=[{"type": "web_search"}],
    )
    assert second.output_text == "noted"
    assert not any(n["code"] == "hosted_items_skipped" for n in second.switchyard["notices"])
    # The backend read the search as a call and its result, not a skipped item.
    messages = recorder.last_messages()
    [call] = [m for m in messages if m.get("tool_calls")][0]["tool_calls"]
    assert call["function"] == {"name": "web_search", "arguments": '{"query":"moon landing"}'}
    [result] = [m for m in messages if m["role"] == "tool"]
    assert "https://en.example.org/wiki/moon-landing" in result["content"]
    # Re-sent by hand, the item is given back too: the backend reads the call and its sources.
    client.responses.create(
        model="sim-model",
        input=[
            {"role": "user", "content": "what landed?"},
            first.output[0].model_dump(exclude_none=True),
            {"role": "user", "content": "[[text:ok]]"},
        ],
        tools=[{"type": "web_search"}],
    )


def test_max_tool_calls_bounds_the_searches(client: OpenAI, searxng):
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "one"}]] [[call:web_search {"query": "two"}]]',
        tools=[{"type": "web_search"}],
        max_tool_calls=1,
    )
    calls = [item for item in response.output if item.type == "web_search_call"]
    assert [call.status for call in calls] == ["completed"]
    [row] = wait_for(lambda: usage_rows(model="sim-model"), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (1, 0)


def test_without_a_provider_the_tool_is_dropped_with_a_notice(client: OpenAI, acme):
    response = client.responses.create(
        model="sim-model", input="[[text:hello]]", tools=[{"type": "web_search"}]
    )
    assert response.output_text == "hello"
    codes = [n["code"] for n in response.switchyard["notices"]]
    assert "hosted_tools_dropped" in codes


def test_another_organisation_s_provider_is_not_used(gateway, searxng, globex):
    response = gateway.openai(globex.key).responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "x"}]] [[text:no search here]]',
        tools=[{"type": "web_search"}],
    )
    assert [item.type for item in response.output] == ["message"]
    assert "hosted_tools_dropped" in [n["code"] for n in response.switchyard["notices"]]


def test_a_bad_search_context_size_is_a_400(client: OpenAI, searxng):
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(
            model="sim-model",
            input="hi",
            tools=[{"type": "web_search", "search_context_size": "huge"}],
        )
    assert refused.value.body["param"] == "tools[0].search_context_size"


def test_allowed_tools_and_tool_choice_may_name_the_search(client: OpenAI, searxng, recorder):
    response = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "allowed"}]]',
        tools=[{"type": "web_search"}],
        tool_choice={
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "web_search"}],
        },
    )
    assert response.output[0].type == "web_search_call"
    forced = client.responses.create(
        model="sim-model",
        input='[[call:web_search {"query": "forced"}]]',
        tools=[{"type": "web_search_preview"}],
        tool_choice={"type": "web_search_preview"},
    )
    assert forced.output[0].type == "web_search_call"
    assert forced.tool_choice.type == "web_search_preview"
    # The backend was told to search, then, with the results, to answer.
    first, then = recorder.requests[-2:]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "web_search"}}
    assert then["tool_choice"] == "auto"


def test_tool_choice_naming_an_unbound_search_is_a_400(client: OpenAI, acme):
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(
            model="sim-model",
            input="hi",
            tools=[{"type": "web_search"}],
            tool_choice={"type": "web_search"},
        )
    assert refused.value.body["param"] == "tool_choice"
    assert "does not run" in refused.value.body["message"]


def test_unbinding_drops_the_tool_again_at_once(client: OpenAI, searxng, people):
    from responses_api.catalogue.services.web_search import web_search_unbind

    ask = '[[call:web_search {"query": "now"}]] [[text:plain]]'
    first = client.responses.create(model="sim-model", input=ask, tools=[{"type": "web_search"}])
    assert first.output[0].type == "web_search_call"
    web_search_unbind(organisation=people["acme"], actor=CLI)
    second = client.responses.create(model="sim-model", input=ask, tools=[{"type": "web_search"}])
    assert [item.type for item in second.output] == ["message"]
    assert "hosted_tools_dropped" in [n["code"] for n in second.switchyard["notices"]]
