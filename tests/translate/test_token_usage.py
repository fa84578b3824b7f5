"""A backend's usage counts are held to what is possible (``translate.token_usage``):
cached tokens within the input, reasoning tokens within the output, the
total always the sum of input and output. What the backend claimed past
that is corrected, chunk by chunk, and noted (``backend_usage_corrected``)."""

from __future__ import annotations

import pytest

from responses_api.protocol.body import CreateResponse
from responses_api.translate.chunks import MAX_COUNT
from responses_api.translate.compaction import AheadTranslator
from responses_api.translate.response import echo_settings
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.token_usage import Usage

ECHO = echo_settings(
    CreateResponse(model="m", input="hi"),
    store=False,
    temperature=None,
    top_p=None,
    max_output_tokens=None,
)

HOSTILE = {
    "prompt_tokens": 10,
    "completion_tokens": 4,
    "total_tokens": 999_999,
    "prompt_tokens_details": {"cached_tokens": 100_000_000},
    "completion_tokens_details": {"reasoning_tokens": 50},
}


def translator() -> StreamTranslator:
    return StreamTranslator(response_id="resp_1", model="m", echo=ECHO)


def chunk(delta=None, finish=None, usage=None) -> dict:
    if usage is not None:
        return {"choices": [], "usage": usage}
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def run(t: StreamTranslator, chunks) -> list[dict]:
    events = list(t.start())
    for one in chunks:
        events.extend(t.feed(one))
    events.extend(t.finish({}))
    return events


def notice_codes(t: StreamTranslator) -> list[str]:
    return [code for code, _ in t.notices()]


def test_impossible_counts_are_cut_to_the_possible_and_noted():
    t = translator()
    final = run(t, [chunk({"content": "Hi"}), chunk(finish="stop"), chunk(usage=HOSTILE)])[-1]
    assert final["response"]["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 14,
    }
    assert notice_codes(t) == ["backend_usage_corrected"]
    message = dict(t.notices())["backend_usage_corrected"]
    assert "100000000 cached of 10 input" in message
    assert "50 reasoning of 4 output" in message
    assert "total of 999999" in message


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        # cached at the top level (llama.cpp) is held to the input as well
        ({"prompt_tokens": 3, "completion_tokens": 1, "cached_tokens": 9}, (3, 3, 1, 0)),
        # no input reported: nothing of it can be cached
        ({"completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 7}}, (0, 0, 2, 0)),
        # no output reported: nothing of it can be reasoning
        ({"prompt_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 7}}, (2, 0, 0, 0)),
        ({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 4}, (2, 0, 3, 0)),
    ],
)
def test_each_impossible_count_alone_is_corrected(usage, counts):
    kept = Usage()
    kept.take(usage)
    got = (kept.input_tokens, kept.cached_tokens, kept.output_tokens, kept.reasoning_tokens)
    assert got == counts
    assert kept.corrected


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 10, "completion_tokens": 4},
        {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "total_tokens": 14,
            "prompt_tokens_details": {"cached_tokens": 10},
            "completion_tokens_details": {"reasoning_tokens": 4},
        },
        {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": None},
        # a total that is no count is not read at all
        {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": "14"},
    ],
)
def test_possible_counts_are_kept_as_they_are_and_not_noted(usage):
    t = translator()
    run(t, [chunk({"content": "Hi"}), chunk(finish="stop"), chunk(usage=usage)])
    final = t.final_usage()
    assert (final.input_tokens, final.output_tokens) == (10, 4)
    assert notice_codes(t) == []


def test_the_last_report_decides_chunk_by_chunk():
    """Backends that repeat usage in several chunks are counted by the last:
    a corrected report followed by a possible one is no correction, and
    the reverse is."""
    t = translator()
    t.feed(chunk(usage=HOSTILE))
    assert notice_codes(t) == ["backend_usage_corrected"]
    t.feed(chunk(usage={"prompt_tokens": 10, "completion_tokens": 4}))
    assert notice_codes(t) == []
    assert t.final_usage().cached_tokens == 0
    t.feed(chunk(usage=HOSTILE))
    assert t.final_usage().cached_tokens == 10
    assert notice_codes(t) == ["backend_usage_corrected"]


def test_an_answer_after_compaction_keeps_the_summary_s_correction():
    """Automatic compaction sums two backend calls: a correction of the
    summary's usage is noted on the answer, whose own usage was possible."""
    summary = translator()
    summary.feed(chunk(usage=HOSTILE))
    item = {"id": "cmp_1", "type": "compaction", "encrypted_content": "x"}
    answer = AheadTranslator(translator(), item=item, usage=summary.final_usage())
    answer.feed(chunk(usage={"prompt_tokens": 5, "completion_tokens": 2}))
    usage = answer.final_usage()
    assert (usage.input_tokens, usage.cached_tokens) == (15, 10)
    assert (usage.output_tokens, usage.reasoning_tokens) == (6, 4)
    assert notice_codes(answer) == ["backend_usage_corrected"]


def test_a_sum_over_two_calls_stays_a_count():
    """Each call's counts are at most 2³¹−1; their sum is held there too,
    so that the row's integer columns can hold it."""
    summary = translator()
    most = {"prompt_tokens": MAX_COUNT, "completion_tokens": MAX_COUNT}
    summary.feed(chunk(usage=most))
    item = {"id": "cmp_1", "type": "compaction", "encrypted_content": "x"}
    answer = AheadTranslator(translator(), item=item, usage=summary.final_usage())
    answer.feed(chunk(usage=most))
    usage = answer.final_usage()
    assert (usage.input_tokens, usage.output_tokens) == (MAX_COUNT, MAX_COUNT)
    assert notice_codes(answer) == ["backend_usage_corrected"]
