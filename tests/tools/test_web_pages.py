"""Web search's other actions end to end: the simulator (the model) calls
``open_page`` or ``find_in_page``, the gateway reads the page from a real
HTTP server under its address policy and caps, and the client (the openai
SDK) gets ``web_search_call`` items of those actions, the answer citing the
page, and one usage row counting each call."""

from __future__ import annotations

import json

import httpx
import pytest
from openai import OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.web_search import web_search_bind
from tests.conftest import usage_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def call(name: str, **arguments: str) -> str:
    return f"[[call:{name} {json.dumps(arguments)}]]"


@pytest.fixture
def searxng(search_api, acme, people):
    return web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )


def test_an_opened_page_is_read_and_cited(client: OpenAI, searxng, page_server):
    url = page_server.url + "/article"
    answer = f"It opened in 1889 [1], says {url}."
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input=call("open_page", url=url) + f" [[answer:{answer}]]",
        tools=[{"type": "web_search"}],
        include=["web_search_call.action.sources"],
    )
    response = raw.parse()
    opened, message = response.output
    assert opened.type == "web_search_call" and opened.id.startswith("ws_")
    assert opened.status == "completed"
    assert opened.action.type == "open_page" and opened.action.url == url
    assert response.output_text == answer
    annotations = [a.model_dump() for a in message.content[0].annotations]
    assert [(a["url"], a["title"]) for a in annotations] == [(url, "The Eiffel Tower")] * 2
    assert answer[annotations[0]["start_index"] : annotations[0]["end_index"]] == "[1]"
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert row.status == 200
    assert (row.tool_calls, row.tool_errors) == (1, 0) and row.tool_ms > 0


def test_the_model_reads_the_page_s_text_and_not_its_script(client: OpenAI, searxng, page_server):
    response = client.responses.create(
        model="sim-model",
        input=call("open_page", url=page_server.url + "/article"),
        tools=[{"type": "web_search", "search_context_size": "low"}],
    )
    text = response.output_text
    assert text.startswith("Tool result: [1] The Eiffel Tower")
    assert "it opened in 1889 for the" in text and "330 metres tall" in text
    assert "script-text-9931" not in text and "color: red" not in text
    # Sources are an action of a search: an opened page shows its URL.
    assert response.output[0].action.url == page_server.url + "/article"


@pytest.mark.parametrize(
    ("path", "told"),
    [("/notes.txt", "the lift was added in 1899"), ("/data.json", '"height_m": 330')],
)
def test_plain_text_and_json_are_read(client: OpenAI, searxng, page_server, path, told):
    response = client.responses.create(
        model="sim-model",
        input=call("open_page", url=page_server.url + path),
        tools=[{"type": "web_search"}],
    )
    assert response.output[0].status == "completed"
    assert told in response.output_text


def test_find_in_page_gives_the_passages_around_each_match(client: OpenAI, searxng, page_server):
    url = page_server.url + "/article"
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input=call("find_in_page", url=url, pattern="gustave eiffel"),
        tools=[{"type": "web_search"}],
    )
    response = raw.parse()
    [found, _] = response.output
    assert found.type == "web_search_call" and found.status == "completed"
    assert found.action.type == "find_in_page"
    assert (found.action.url, found.action.pattern) == (url, "gustave eiffel")
    text = response.output_text
    assert '"gustave eiffel" occurs' in text
    assert "Gustave Eiffel's company" in text and "GUSTAVE EIFFEL defended it" in text
    missing = client.responses.create(
        model="sim-model",
        input=call("find_in_page", url=url, pattern="Statue of Liberty"),
        tools=[{"type": "web_search"}],
    )
    assert '"Statue of Liberty" does not occur in the page.' in missing.output_text
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (1, 0)


def test_a_search_an_open_and_a_find_share_one_numbering_and_one_fetch(
    client: OpenAI, searxng, page_server
):
    url = page_server.url + "/article?one"
    before = httpx.get(page_server.url + "/stats").json().count("/article")
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input=call("web_search", query="eiffel tower")
        + call("open_page", url=url)
        + call("find_in_page", url=url, pattern="330")
        + " [[answer:Tall [4]; opened in 1889 [1].]]",
        tools=[{"type": "web_search"}],
        include=["web_search_call.action.sources"],
    )
    response = raw.parse()
    kinds = [(item.type, getattr(item, "action", None)) for item in response.output]
    assert [k for k, _ in kinds] == ["web_search_call"] * 3 + ["message"]
    assert [a.type for _, a in kinds[:3]] == ["search", "open_page", "find_in_page"]
    assert all(item.status == "completed" for item in response.output[:3])
    # The page is the fourth source, after the search's three; read once.
    cited = [(a.url, a.title) for a in response.output[3].content[0].annotations]
    assert cited == [
        (url, "The Eiffel Tower"),
        ("https://en.example.org/wiki/eiffel-tower", "eiffel tower - Encyclopedia"),
    ]
    assert httpx.get(page_server.url + "/stats").json().count("/article") == before + 1
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (3, 0)


def test_a_streamed_open_page_is_in_openai_s_order(client: OpenAI, searxng, page_server):
    url = page_server.url + "/article"
    with client.responses.stream(
        model="sim-model",
        input=call("open_page", url=url) + " [[answer:Opened in 1889 [1].]]",
        tools=[{"type": "web_search"}],
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
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
    assert events[2].item.action.type == "open_page"
    done = events[6].item
    assert (done.status, done.action.type, done.action.url) == ("completed", "open_page", url)
    assert "response.output_text.annotation.added" in kinds
    assert kinds[-1] == "response.completed"
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(numbers)))
    assert [item.type for item in final.output] == ["web_search_call", "message"]
    [citation] = final.output[1].content[0].annotations
    assert citation.url == url


def test_a_page_a_search_returned_keeps_its_number(client: OpenAI, searxng, page_server, recorder):
    url = page_server.url + "/article"
    response = client.responses.create(
        model="sim-model",
        input=call("web_search", query=url) + call("open_page", url=url) + " [[answer:See [1].]]",
        tools=[{"type": "web_search"}],
        include=["web_search_call.action.sources"],
    )
    searched, opened = response.output[:2]
    assert searched.action.sources[0].url == url and len(searched.action.sources) == 3
    assert opened.status == "completed"
    told = [m["content"] for m in recorder.last_messages() if m["role"] == "tool"]
    assert told[1].startswith("[1] The Eiffel Tower") and "Cite this page as [1]." in told[1]
    [citation] = response.output[2].content[0].annotations
    assert (citation.url, citation.title) == (url, f"{url} - Encyclopedia")


def test_a_page_read_in_the_history_is_given_back_as_its_call(
    client: OpenAI, searxng, page_server, recorder
):
    url = page_server.url + "/article"
    first = client.responses.create(
        model="sim-model",
        input=call("find_in_page", url=url, pattern="1889"),
        tools=[{"type": "web_search"}],
    )
    second = client.responses.create(
        model="sim-model",
        previous_response_id=first.id,
        input="[[text:noted]]",
        tools=[{"type": "web_search"}],
    )
    assert second.output_text == "noted"
    assert not any(n["code"] == "hosted_items_skipped" for n in second.switchyard["notices"])
    messages = recorder.last_messages()
    [call_made] = [m for m in messages if m.get("tool_calls")][0]["tool_calls"]
    assert call_made["function"]["name"] == "find_in_page"
    assert json.loads(call_made["function"]["arguments"]) == {"url": url, "pattern": "1889"}
    # Re-sent by hand, an open_page item is accepted too.
    replayed = client.responses.create(
        model="sim-model",
        input=[
            {"role": "user", "content": "what does it say?"},
            {
                "id": "ws_1",
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "open_page", "url": url},
            },
            {"role": "user", "content": "[[text:ok]]"},
        ],
        tools=[{"type": "web_search"}],
    )
    assert replayed.output_text == "ok"
    [call_made] = [m for m in recorder.last_messages() if m.get("tool_calls")][0]["tool_calls"]
    assert call_made["function"] == {
        "name": "open_page",
        "arguments": json.dumps({"url": url}, separators=(",", ":")),
    }


@pytest.mark.parametrize(("size", "chars"), [("low", 3000), ("high", 12000)])
def test_the_page_the_model_reads_is_cut_to_the_context_size(
    client: OpenAI, searxng, page_server, size, chars
):
    response = client.responses.create(
        model="sim-model",
        input=call("open_page", url=page_server.url + "/long"),
        tools=[{"type": "web_search", "search_context_size": size}],
    )
    text = response.output_text
    assert text.endswith("[… the page goes on]")
    body = text.split("\n\n", 1)[1].removesuffix("\n[… the page goes on]")
    assert len(body) == chars and body.startswith("line 00000 of the long page")
    assert "line 03999" not in text


def test_allowed_tools_naming_web_search_allows_its_pages(client: OpenAI, searxng, recorder):
    client.responses.create(
        model="sim-model",
        input="[[text:hi]]",
        tools=[{"type": "web_search"}, {"type": "function", "name": "other", "parameters": {}}],
        tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search"}]},
    )
    offered = [tool["function"]["name"] for tool in recorder.requests[-1]["tools"]]
    assert offered == ["web_search", "open_page", "find_in_page"]


def test_find_in_page_merges_close_matches_and_ignores_case():
    from responses_api.pipeline.web_pages import Read, found_text

    text = "Alpha beta. " * 3 + "x" * 2000 + " straße ALPHA end"
    told = found_text(Read("https://e.example/", "E", text), "alpha", 1, 6000)
    assert '"alpha" occurs in 2 places in the page:' in told
    assert told.count("… ") == 2 and "straße ALPHA end" in told
    # The passages are cut to the characters the context size allows.
    many = "needle " + ("y" * 600 + " needle ") * 20
    cut = found_text(Read("https://e.example/", "E", many), "NEEDLE", 1, 1200)
    assert cut.endswith("[… more passages left out]") and len(cut) < 1600
