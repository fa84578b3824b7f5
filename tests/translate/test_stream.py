"""Chat chunks → Responses events, the state machine chunk by chunk."""

from __future__ import annotations

import orjson
import pytest
from openai._models import construct_type_unchecked
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

from responses_api.backends.sse import ChunkReader
from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.body import CreateResponse
from responses_api.translate.partial_json import StringFieldDecoder
from responses_api.translate.response import echo_settings
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.tools import ToolRef

ECHO = echo_settings(
    CreateResponse(model="m", input="hi"),
    store=False,
    temperature=None,
    top_p=None,
    max_output_tokens=None,
)


def translator(**kwargs) -> StreamTranslator:
    return StreamTranslator(response_id="resp_1", model="m", echo=ECHO, **kwargs)


def chunk(delta=None, finish=None, usage=None):
    out = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage is not None:
        out = {"choices": [], "usage": usage}
    return out


def run(t: StreamTranslator, chunks, extras=None):
    events = list(t.start())
    for c in chunks:
        events.extend(t.feed(c))
    events.extend(t.finish(extras or {}))
    EventWriter().encode(events)  # numbers them
    return events


def sdk_replay(events):
    """The OpenAI SDK's own stream state accepts the events and rebuilds the response."""
    state = ResponseStreamState(input_tools=[], text_format=omit)
    for event in events:
        parsed = construct_type_unchecked(
            type_=ResponseStreamEvent, value=orjson.loads(orjson.dumps(event))
        )
        state.handle_event(parsed)
    return state._completed_response


def types(events):
    return [e["type"] for e in events]


def test_text_stream_has_the_full_grammar_and_numbering():
    t = translator()
    events = run(
        t,
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}),
            chunk(finish="stop"),
        ],
    )
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    assert final["output"][0]["content"][0]["text"] == "Hello"
    assert "phase" not in final["output"][0]
    assert sdk_replay(events).output_text == "Hello"


def test_reasoning_from_either_field_becomes_a_reasoning_item_before_the_message():
    for field in ("reasoning_content", "reasoning"):
        t = translator()
        events = run(
            t,
            [
                chunk({field: "think "}),
                chunk({field: "hard"}),
                chunk({"content": "ok"}),
                chunk(finish="stop"),
            ],
        )
        final = events[-1]["response"]
        assert [i["type"] for i in final["output"]] == ["reasoning", "message"]
        assert final["output"][0]["content"] == [{"type": "reasoning_text", "text": "think hard"}]
        done = next(e for e in events if e["type"] == "response.reasoning_text.done")
        assert done["text"] == "think hard"
        Response.model_validate(final)


def test_parallel_function_calls_with_arguments_split_anywhere():
    t = translator(tools={"f": ToolRef("function", "f"), "ns__g": ToolRef("function", "g", "ns")})
    chunks = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "ns__g", "arguments": '{"q'},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": "\\u00'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '": 1}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'e9"}'}}]}),
        chunk(finish="tool_calls"),
        chunk(
            usage={
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 4},
            }
        ),
    ]
    events = run(t, chunks)
    final = events[-1]["response"]
    calls = final["output"]
    assert [(c["name"], c["call_id"], c.get("namespace")) for c in calls] == [
        ("f", "c0", None),
        ("g", "c1", "ns"),
    ]
    assert orjson.loads(calls[0]["arguments"]) == {"a": "é"}
    for call in calls:
        deltas = "".join(
            e["delta"]
            for e in events
            if e["type"] == "response.function_call_arguments.delta" and e["item_id"] == call["id"]
        )
        assert deltas == call["arguments"]
    assert final["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    rebuilt = sdk_replay(events)
    assert [c.name for c in rebuilt.output] == ["f", "g"]


SPLITS = [
    '{"in',
    'put": "*** Be',
    "gin Patch\\",
    "n+caf\\u00",
    "e9 \\ud83d",
    "\\ude00 \\",
    '"q\\"',
    '"}',
]


def test_custom_tool_input_streams_decoded_as_it_arrives():
    t = translator(tools={"apply_patch": ToolRef("custom", "apply_patch")})
    chunks = [
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "apply_patch", "arguments": ""}}
                ]
            }
        )
    ]
    chunks += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in SPLITS
    ]
    events = run(t, [*chunks, chunk(finish="tool_calls")])
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    expected = '*** Begin Patch\n+café 😀 "q"'
    assert len(deltas) > 3  # incremental, not one delta at the end
    assert "".join(deltas) == expected
    done = next(e for e in events if e["type"] == "response.custom_tool_call_input.done")
    assert done["input"] == expected
    item = events[-1]["response"]["output"][0]
    assert (
        item["type"] == "custom_tool_call" and item["input"] == expected and item["call_id"] == "c"
    )
    assert sdk_replay(events).output[0].input == expected


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_decoder_gives_the_same_text_whatever_the_cuts(size):
    raw = orjson.dumps({"input": 'line1\n\t"tab" \\ é 😀 end'}).decode().replace("é", "\\u00e9")
    decoder = StringFieldDecoder()
    out = "".join(decoder.feed(raw[i : i + size]) for i in range(0, len(raw), size))
    assert out == 'line1\n\t"tab" \\ é 😀 end' and decoder.complete


def test_custom_tool_arguments_of_another_shape_arrive_whole_at_the_end():
    t = translator(tools={"apply_patch": ToolRef("custom", "apply_patch")})
    chunks = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c",
                        "function": {"name": "apply_patch", "arguments": "raw text"},
                    }
                ]
            }
        ),
        chunk(finish="tool_calls"),
    ]
    events = run(t, chunks)
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert deltas == ["raw text"]


def test_tool_search_call_comes_back_as_its_item_type():
    t = translator(tools={"tool_search": ToolRef("tool_search", "tool_search")})
    events = run(
        t,
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "t",
                            "function": {"name": "tool_search", "arguments": '{"query": "cal"}'},
                        }
                    ]
                }
            ),
            chunk(finish="tool_calls"),
        ],
    )
    item = events[-1]["response"]["output"][0]
    assert item["type"] == "tool_search_call" and item["execution"] == "client"
    assert item["arguments"] == {"query": "cal"} and item["call_id"] == "t"


def test_max_tool_calls_caps_the_calls_returned():
    t = translator(max_tool_calls=1)
    chunks = [
        chunk(
            {
                "tool_calls": [
                    {"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}
                ]
            }
        )
        for i in range(3)
    ]
    events = run(t, [*chunks, chunk(finish="tool_calls")])
    assert len(events[-1]["response"]["output"]) == 1


@pytest.mark.parametrize(
    ("finish", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")]
)
def test_cut_off_answers_end_incomplete(finish, reason):
    events = run(translator(), [chunk({"content": "abc"}), chunk(finish=finish)])
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": reason}
    assert events[-1]["response"]["status"] == "incomplete"


def test_failure_after_start_ends_with_one_failed_event_closing_open_items():
    t = translator()
    events = list(t.start()) + t.feed(chunk({"content": "partial"}))
    events += t.fail("rate_limit_exceeded", "slow down", {})
    terminal = [
        e
        for e in events
        if e["type"] in {"response.completed", "response.failed", "response.incomplete"}
    ]
    assert len(terminal) == 1 and terminal[0]["type"] == "response.failed"
    assert terminal[0]["response"]["error"] == {
        "code": "rate_limit_exceeded",
        "message": "slow down",
    }
    assert "response.output_item.done" in types(events)


def test_keepalive_is_an_in_progress_event():
    assert translator().keepalive()["type"] == "response.in_progress"


def test_utf8_split_across_network_reads_is_reassembled():
    body = (
        "data: " + orjson.dumps(chunk({"content": "héllo 😀"})).decode() + "\n\ndata: [DONE]\n\n"
    ).encode()
    reader = ChunkReader()
    chunks = []
    for i in range(len(body)):
        chunks += reader.feed(body[i : i + 1])
    assert chunks[0]["choices"][0]["delta"]["content"] == "héllo 😀" and reader.done


def test_final_response_validates_against_the_sdk_type_with_switchyard_extras():
    t = translator()
    extras = {"request_id": "r", "backend": None, "timing": {}, "notices": []}
    events = run(t, [chunk({"content": "x"}), chunk(finish="stop")], extras)
    final = events[-1]["response"]
    response = Response.model_validate(final)
    assert response.status == "completed" and final["switchyard"] == extras
    for name in (
        "completed_at",
        "truncation",
        "top_logprobs",
        "service_tier",
        "background",
        "store",
    ):
        assert name in final
