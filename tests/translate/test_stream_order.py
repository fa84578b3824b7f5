"""Items never interleave in a stream, and items cut short say so."""

from __future__ import annotations

import orjson
import pytest
from openai.types.responses import Response

from responses_api.simulator.content import call_deltas
from responses_api.translate.sealing import ReasoningSeal
from responses_api.translate.tools import ToolRef
from tests.grammar import check_stream
from tests.translate.test_stream import chunk, sdk_replay, translator

CALLS = [
    ("get_weather", '{"city": "Paris, France", "unit": "celsius"}'),
    ("get_weather", '{"city": "Oslo"}'),
    ("apply_patch", orjson.dumps({"input": "*** Begin Patch\n+caf\u00e9\n*** End"}).decode()),
]
TOOLS = {
    "get_weather": ToolRef("function", "get_weather"),
    "apply_patch": ToolRef("custom", "apply_patch"),
}


def numbered(events):
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def run(t, chunks, *, fail: bool = False):
    events = list(t.start())
    for c in chunks:
        events.extend(t.feed(c))
    events.extend(t.fail("server_error", "broken", {}) if fail else t.finish({}))
    return numbered(events)


def call_chunks(interleave: bool):
    return [
        chunk(delta)
        for delta, _ in call_deltas(CALLS, "chatcmpl-1", interleave)  # the simulator's own
    ] + [chunk(finish="tool_calls")]


@pytest.mark.parametrize("interleave", [False, True])
def test_parallel_calls_are_written_one_after_another_whatever_the_backend_sends(interleave):
    t = translator(tools=TOOLS)
    events = run(t, call_chunks(interleave))
    final = check_stream(events)
    assert [(i["type"], i.get("arguments") or i.get("input")) for i in final["output"]] == [
        ("function_call", CALLS[0][1]),
        ("function_call", CALLS[1][1]),
        ("custom_tool_call", "*** Begin Patch\n+caf\u00e9\n*** End"),
    ]
    assert all(item["status"] == "completed" for item in final["output"])
    assert [c.name for c in sdk_replay(events).output] == ["get_weather"] * 2 + ["apply_patch"]


def test_sequential_calls_still_stream_each_calls_arguments_as_they_arrive():
    t = translator(tools=TOOLS)
    events = run(t, call_chunks(interleave=False))
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    # 7-character pieces, as the backend sent them: nothing held back.
    assert len(deltas) == sum(-(-len(arguments) // 7) for _, arguments in CALLS[:2])


def test_interleaved_calls_in_a_non_streamed_answer_have_the_same_output():
    streamed = run(translator(tools=TOOLS), call_chunks(interleave=True))[-1]["response"]
    quiet = translator(tools=TOOLS, quiet=True)
    for c in call_chunks(interleave=True):
        quiet.feed(c)
    quiet.close_items()
    body = quiet.response("completed")
    strip = [{k: v for k, v in item.items() if k != "id"} for item in body["output"]]
    assert strip == [{k: v for k, v in i.items() if k != "id"} for i in streamed["output"]]


def test_a_call_whose_arguments_never_complete_holds_the_next_back_until_the_end():
    t = translator(tools=TOOLS)
    head = [
        {"index": i, "id": f"c{i}", "function": {"name": "get_weather", "arguments": ""}}
        for i in range(2)
    ]
    events = run(
        t,
        [
            chunk({"tool_calls": head}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"city": "B"}'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "A'}}]}),
            chunk(finish="length"),
        ],
    )
    final = check_stream(events)
    assert [i["arguments"] for i in final["output"]] == ['{"city": "A', '{"city": "B"}']
    assert [i["status"] for i in final["output"]] == ["incomplete", "incomplete"]


def test_text_after_calls_closes_them_first():
    t = translator(tools=TOOLS)
    events = run(
        t,
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ]
                }
            ),
            chunk({"content": "and also"}),
            chunk(finish="stop"),
        ],
    )
    final = check_stream(events)
    assert [i["type"] for i in final["output"]] == ["function_call", "message"]


def test_a_failed_response_marks_the_items_it_cut_short_incomplete():
    t = translator()
    events = run(
        t,
        [chunk({"reasoning_content": "hmm"}), chunk({"content": "partial answ"})],
        fail=True,
    )
    final = check_stream(events)
    assert events[-1]["type"] == "response.failed"
    assert [(i["type"], i["status"]) for i in final["output"]] == [
        ("reasoning", "completed"),
        ("message", "incomplete"),
    ]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done[-1]["status"] == "incomplete"
    Response.model_validate(final)


def test_a_length_cut_off_marks_the_open_message_incomplete():
    events = run(translator(), [chunk({"content": "abc"}), chunk(finish="length")])
    assert check_stream(events)["output"][0]["status"] == "incomplete"


def test_dropped_calls_are_counted_in_a_notice():
    t = translator(max_tool_calls=1)
    run(
        t,
        [
            chunk({"tool_calls": [{"index": i, "id": f"c{i}", "function": {"name": "f"}}]})
            for i in range(3)
        ],
    )
    ((code, message),) = t.notices()
    assert code == "tool_calls_dropped" and "2 more tool calls" in message
    assert translator().notices() == []


def test_reasoning_is_sealed_only_when_asked_for():
    seal = ReasoningSeal([b"k" * 32], 7)
    chunks = [chunk({"reasoning_content": "deep thought"}), chunk({"content": "42"})]
    sealed = check_stream(run(translator(seal=seal), chunks))["output"][0]
    assert sealed["content"] == [{"type": "reasoning_text", "text": "deep thought"}]
    assert seal.open(sealed["encrypted_content"]) == "deep thought"
    plain = check_stream(run(translator(), chunks))["output"][0]
    assert "encrypted_content" not in plain
    assert (
        Response.model_validate(run(translator(), chunks)[-1]["response"])
        .output[0]
        .encrypted_content
        is None
    )
