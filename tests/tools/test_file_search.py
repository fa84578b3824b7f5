"""File search end to end: the OpenAI SDK asks for a response with
``{"type": "file_search", "vector_store_ids": [...]}``, the simulator (the
model) calls the search, the gateway searches the organisation's vector
store (the query embedded by the simulator's embeddings) and asks the
model again, and the client gets one response with the
``file_search_call`` item and the answer, its files cited."""

from __future__ import annotations

import pytest
from openai import BadRequestError, OpenAI

from tests.conftest import free_port, usage_rows, wait_for
from tests.tools.files import REFUNDS, embed_model

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "Refunds are paid within 14 days [1], see refunds.md."
ASK = f'How fast are refunds? [[call:file_search {{"query": "refunds paid"}}]] [[answer:{ANSWER}]]'


def tool(store, **extra):
    return {"type": "file_search", "vector_store_ids": [store.store_id], **extra}


def test_a_search_runs_and_the_answer_cites_its_file(client: OpenAI, store):
    raw = client.responses.with_raw_response.create(
        model="sim-model", input=ASK, tools=[tool(store)], include=["file_search_call.results"]
    )
    response = raw.parse()
    assert [item.type for item in response.output] == ["file_search_call", "message"]
    searched, message = response.output
    assert searched.id.startswith("fs_") and searched.status == "completed"
    assert searched.queries == ["refunds paid"]
    first = searched.results[0]
    assert (first.file_id, first.filename, first.text) == ("file-refunds", "refunds.md", REFUNDS)
    assert first.attributes == {"team": "finance"} and 0 < first.score <= 1
    assert response.output_text == ANSWER
    annotations = [a.model_dump() for a in message.content[0].annotations]
    assert annotations == [
        {
            "type": "file_citation",
            "file_id": "file-refunds",
            "filename": "refunds.md",
            "index": ANSWER.index("[1]"),
        },
        {
            "type": "file_citation",
            "file_id": "file-refunds",
            "filename": "refunds.md",
            "index": ANSWER.index("refunds.md") + len("refunds.md"),
        },
    ]
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert row.status == 200
    assert (row.tool_calls, row.tool_errors) == (1, 0) and row.tool_ms > 0


def test_the_model_reads_the_results_numbered_and_results_show_only_when_included(
    client: OpenAI, store
):
    response = client.responses.create(
        model="sim-model",
        input='[[call:file_search {"query": "travel receipt"}]]',
        tools=[tool(store, max_num_results=1)],
    )
    text = response.output_text
    assert text.startswith('Tool result: File search results for "travel receipt"')
    assert "[1] travel.md (file file-travel)" in text and "receipt" in text
    assert "refunds.md" not in text  # max_num_results
    assert response.output[0].results is None


def test_a_streamed_search_is_in_openai_s_order(client: OpenAI, store):
    with client.responses.stream(model="sim-model", input=ASK, tools=[tool(store)]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:8] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    added = events[2]
    assert added.item.type == "file_search_call" and added.item.status == "in_progress"
    assert events[6].item.status == "completed" and events[6].item.queries == ["refunds paid"]
    annotated = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert [e.annotation.type for e in annotated] == ["file_citation"] * 2
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [item.type for item in final.output] == ["file_search_call", "message"]
    assert final.output[1].content[0].annotations[0].file_id == "file-refunds"


def test_filters_keep_only_the_files_they_match(client: OpenAI, store):
    response = client.responses.create(
        model="sim-model",
        input='[[call:file_search {"query": "refunds paid"}]]',
        tools=[tool(store, filters={"type": "eq", "key": "team", "value": "ops"})],
        include=["file_search_call.results"],
    )
    assert {r.file_id for r in response.output[0].results} == {"file-travel"}


def test_a_number_that_is_no_result_is_not_cited(client: OpenAI, store):
    response = client.responses.create(
        model="sim-model",
        input='[[call:file_search {"query": "refunds"}]] [[answer:Two weeks [9].]]',
        tools=[tool(store, max_num_results=1)],
    )
    assert response.output[1].content[0].annotations == []


def test_another_organisation_s_store_is_refused_as_a_missing_one(gateway, store, globex):
    charlie = gateway.openai(globex.key)
    refusals = []
    for store_id in (store.store_id, "vs_nothing_here"):
        with pytest.raises(BadRequestError) as refused:
            charlie.responses.create(
                model="sim-model",
                input="hi",
                tools=[{"type": "file_search", "vector_store_ids": [store_id]}],
            )
        body = refused.value.body
        refusals.append((body["param"], body["message"].replace(store_id, "ID")))
    assert refusals[0] == refusals[1]
    assert refusals[0][0] == "tools[0].vector_store_ids"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"max_num_results": 0}, "tools[0].max_num_results"),
        ({"filters": {"type": "eq", "key": "team"}}, "tools[0].filters"),
        ({"ranking_options": {"ranker": "best"}}, "tools[0].ranking_options.ranker"),
        ({"vector_store_ids": "vs_1"}, "tools[0].vector_store_ids"),
    ],
)
def test_bad_settings_are_a_400_naming_them(client: OpenAI, store, extra, param):
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(model="sim-model", input="hi", tools=[{**tool(store), **extra}])
    assert refused.value.body["param"] == param


def test_without_stores_the_tool_is_dropped_with_a_notice(client: OpenAI, acme):
    response = client.responses.create(
        model="sim-model",
        input="[[text:hello]]",
        tools=[{"type": "file_search", "vector_store_ids": []}],
    )
    assert response.output_text == "hello"
    assert "hosted_tools_dropped" in [n["code"] for n in response.switchyard["notices"]]


def test_tool_choice_forces_a_bound_search_and_is_a_400_when_unbound(
    client: OpenAI, store, recorder
):
    forced = client.responses.create(
        model="sim-model",
        input='[[call:file_search {"query": "refunds"}]]',
        tools=[tool(store)],
        tool_choice={"type": "file_search"},
    )
    assert forced.output[0].type == "file_search_call"
    first, then = recorder.requests[-2:]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "file_search"}}
    assert then["tool_choice"] == "auto"
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(
            model="sim-model",
            input="hi",
            tools=[{"type": "file_search", "vector_store_ids": []}],
            tool_choice={"type": "file_search"},
        )
    assert refused.value.body["param"] == "tool_choice"


def test_a_failing_search_fails_its_call_not_the_response(client: OpenAI, store, people):
    # The embedding backend goes down: nothing listens on its port any more.
    embed_model(people["acme"], f"http://127.0.0.1:{free_port()}")
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input='[[call:file_search {"query": "anything"}]]',
        tools=[tool(store)],
    )
    response = raw.parse()
    assert response.status == "completed"
    assert response.output[0].type == "file_search_call"
    assert response.output[0].status == "failed"
    assert 'The file search for "anything" failed: Backend' in response.output_text
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (1, 1)


def test_max_tool_calls_bounds_the_searches(client: OpenAI, store):
    response = client.responses.create(
        model="sim-model",
        input='[[call:file_search {"query": "one"}]] [[call:file_search {"query": "two"}]]',
        tools=[tool(store)],
        max_tool_calls=1,
    )
    calls = [item for item in response.output if item.type == "file_search_call"]
    assert [call.status for call in calls] == ["completed"]
    [row] = wait_for(lambda: usage_rows(model="sim-model"), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (1, 0)


def test_a_search_in_the_history_is_given_back_to_the_model(client: OpenAI, store, recorder):
    first = client.responses.create(
        model="sim-model",
        input='[[call:file_search {"query": "refunds paid"}]]',
        tools=[tool(store)],
        include=["file_search_call.results"],
    )
    second = client.responses.create(
        model="sim-model",
        previous_response_id=first.id,
        input="[[text:noted]]",
        tools=[tool(store)],
    )
    assert second.output_text == "noted"
    assert not any(n["code"] == "hosted_items_skipped" for n in second.switchyard["notices"])
    messages = recorder.last_messages()
    [call] = [m for m in messages if m.get("tool_calls")][0]["tool_calls"]
    assert call["function"] == {"name": "file_search", "arguments": '{"query":"refunds paid"}'}
    [result] = [m for m in messages if m["role"] == "tool"]
    assert "refunds.md" in result["content"] and "14 days" in result["content"]
    # Re-sent by hand, the item is given back too.
    client.responses.create(
        model="sim-model",
        input=[
            {"role": "user", "content": "how fast?"},
            first.output[0].model_dump(exclude_none=True),
            {"role": "user", "content": "[[text:ok]]"},
        ],
        tools=[tool(store)],
    )
    messages = recorder.last_messages()
    [result] = [m for m in messages if m["role"] == "tool"]
    assert "14 days" in result["content"]


def test_a_call_with_several_queries_searches_each(client: OpenAI, store):
    response = client.responses.create(
        model="sim-model",
        input='[[call:file_search {"queries": ["refunds paid", "travel receipt"]}]]',
        tools=[tool(store)],
        include=["file_search_call.results"],
    )
    searched = response.output[0]
    assert searched.queries == ["refunds paid", "travel receipt"]
    assert {r.file_id for r in searched.results} == {"file-refunds", "file-travel"}
    scores = [r.score for r in searched.results]
    assert scores == sorted(scores, reverse=True)
