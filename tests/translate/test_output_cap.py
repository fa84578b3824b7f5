"""The output cap (docs/operations/limits.md): what the translator keeps of an answer
that goes on past its output limit, and when its backend's count was false."""

from __future__ import annotations

from responses_api.translate.output_cap import (
    CHARS_PER_TOKEN,
    ITEM_CHARS,
    MAX_CAPPED_TOKENS,
    OUTPUT_ALLOWANCE,
    output_cap,
)
from responses_api.translate.stream import StreamTranslator
from tests.translate.test_stream import ECHO, chunk, run, sdk_replay


def translator(max_output_tokens: int | None) -> StreamTranslator:
    return StreamTranslator(
        response_id="resp_1", model="m", echo=ECHO, max_output_tokens=max_output_tokens
    )


def test_the_cap_is_the_limit_in_characters_with_its_stated_margin():
    assert output_cap(100) == 100 * CHARS_PER_TOKEN + OUTPUT_ALLOWANCE
    assert output_cap(None) == output_cap(MAX_CAPPED_TOKENS) == output_cap(10**6)


def test_text_past_the_cap_is_cut_there_and_the_answer_is_incomplete():
    t = translator(10)
    cap = output_cap(10)
    piece = "x" * 1000
    events = run(t, [chunk({"content": piece}) for _ in range(cap // 1000 + 5)])
    assert t.output_cap.reached
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert len(deltas) == cap - ITEM_CHARS
    last = events[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    sdk_replay(events)  # the SDK takes the events as they are
    # Nothing after the cap is read: not even a chunk that would end it.
    assert t.feed(chunk(finish="stop")) == []
    assert t.finish_reason is None


def test_an_answer_within_the_cap_is_untouched():
    t = translator(10)
    text = "y" * (output_cap(10) - ITEM_CHARS)
    events = run(t, [chunk({"content": text}), chunk(finish="stop")])
    assert not t.output_cap.reached
    assert events[-1]["type"] == "response.completed"


def test_items_count_against_the_cap_so_alternation_cannot_make_millions():
    t = translator(1)
    alternating = [chunk({"reasoning_content" if i % 2 else "content": "a"}) for i in range(10_000)]
    run(t, alternating)
    assert t.output_cap.reached
    assert len(t.items) <= output_cap(1) // ITEM_CHARS + 1


def test_tool_call_arguments_are_cut_at_the_cap_and_calls_stop_opening():
    t = translator(1)
    calls = [
        chunk(
            {
                "tool_calls": [
                    {"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": "1" * 4000}}
                ]
            }
        )
        for i in range(100)
    ]
    run(t, calls)
    assert t.output_cap.reached
    held = sum(len("".join(item.text)) for item in t.items)
    assert held + ITEM_CHARS * len(t.items) <= output_cap(1)


def test_a_count_that_cannot_hold_the_text_is_false_only_past_the_cap():
    cap = output_cap(100)
    lying = translator(100)
    run(
        lying,
        [
            chunk(usage={"prompt_tokens": 1, "completion_tokens": 1}),
            chunk({"content": "z" * (cap + 1)}),
        ],
    )
    assert lying.output_cap.miscounted(lying.usage.output_tokens)
    # A backend that overran its limit and says so is no liar: incomplete.
    honest = translator(100)
    run(
        honest,
        [
            chunk(usage={"prompt_tokens": 1, "completion_tokens": 500}),
            chunk({"content": "z" * (cap + 1)}),
        ],
    )
    assert not honest.output_cap.miscounted(honest.usage.output_tokens)
    # No count given: nothing to be false.
    silent = translator(100)
    run(silent, [chunk({"content": "z" * (cap + 1)})])
    assert not silent.output_cap.miscounted(None)
    # Under the cap, the count is not judged.
    small = translator(100)
    run(
        small,
        [chunk(usage={"prompt_tokens": 1, "completion_tokens": 1}), chunk({"content": "z" * 100})],
    )
    assert not small.output_cap.miscounted(small.usage.output_tokens)
