"""A hosted kind's call (web search) chunk by chunk: the model's function
call becomes a ``web_search_call`` that waits while the gateway searches,
then the answer after it gets its citations; the OpenAI SDK's own stream
state takes every event, in order."""

from __future__ import annotations

from responses_api.pipeline.writers import EventWriter
from responses_api.translate.citations import Source, annotator
from responses_api.translate.hosted_calls import call_done, pending_calls
from responses_api.translate.tool_turns import next_call
from responses_api.translate.tools import ChatTools, HostedFunction, ToolRef
from tests.translate.test_stream import chunk, sdk_replay, translator, types
from tests.translate.test_tool_turns import call_chunks

SEARCH = HostedFunction(
    ToolRef(kind="web_search", name="web_search", item=("web_search_call", "ws")),
    "Search the web.",
    {"type": "object", "properties": {"query": {"type": "string"}}},
)


def test_a_search_then_a_cited_answer_are_one_response_the_sdk_reads():
    tools = ChatTools()
    tools.add_hosted(SEARCH)
    assert [t["function"]["name"] for t in tools.chat_tools] == ["web_search"]
    t = translator(tools=tools.refs)
    events = list(t.start())
    for c in call_chunks("web_search", ['{"query": ', '"paris"}']):
        events += t.feed(c)
    events += t.close_items()
    [waiting] = pending_calls(t.items)
    assert waiting.item_id.startswith("ws_")
    assert waiting.done_item == {
        "id": waiting.item_id,
        "type": "web_search_call",
        "status": "searching",
        "action": {"type": "search", "query": "paris"},
    }
    sources = [Source("https://paris.example/", "Paris")]
    t.closing.annotate = annotator(sources)
    events += call_done(
        waiting, failed=False, extra={"sources": [{"type": "url", "url": "https://paris.example/"}]}
    )
    assert pending_calls(t.items) == []
    next_call(t)
    events += t.feed(chunk({"content": "Paris is the capital [1]."}, finish="stop"))
    events += t.finish({})
    EventWriter().encode(events)

    assert types(events)[2:7] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    # No argument deltas: the query shows once it is whole.
    assert not any("arguments" in kind for kind in types(events))
    assert types(events)[-5:] == [
        "response.output_text.annotation.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    rebuilt = sdk_replay(events)
    searched, message = rebuilt.output
    assert searched.type == "web_search_call" and searched.status == "completed"
    assert searched.action.sources[0].url == "https://paris.example/"
    [citation] = message.content[0].annotations
    assert (citation.start_index, citation.end_index) == (21, 24)


def test_a_search_cut_short_is_incomplete_not_left_searching():
    tools = ChatTools()
    tools.add_hosted(SEARCH)
    t = translator(tools=tools.refs)
    events = list(t.start())
    events += t.feed(
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "web_search", "arguments": '{"qu'}}
                ]
            }
        )
    )
    events += t.feed(chunk({}, finish="length"))
    events += t.finish({})
    assert pending_calls(t.items) == []
    final = events[-1]["response"]
    assert final["output"][0]["type"] == "web_search_call"
    assert final["output"][0]["status"] == "incomplete"
