"""The backend chunk check: the typed one (``translate.chunks``) and the
fast path that ``StreamTranslator.feed`` takes for text chunks, which must
never accept what the typed check refuses, nor read a chunk otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_api.translate import stream as stream_module
from responses_api.translate.chunks import BadChunk, check_chunk
from responses_api.translate.stream import StreamTranslator

VALUES = st.sampled_from([None, 0, 1, -1, 5, True, 2.5, "", "x", " tok", [], {}, [1], {"a": 1}])


def _dict(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict]:
    return st.dictionaries(st.sampled_from(keys), values, max_size=len(keys))


DELTAS = _dict(
    ["role", "content", "reasoning_content", "reasoning", "refusal", "tool_calls", "other"], VALUES
)
CHOICES = _dict(
    ["index", "delta", "finish_reason", "logprobs", "message", "other"],
    st.one_of(VALUES, DELTAS),
)
CHUNKS = _dict(
    ["choices", "usage", "model", "id"],
    st.one_of(
        VALUES,
        st.lists(st.one_of(CHOICES, VALUES), max_size=2),
        _dict(["prompt_tokens", "completion_tokens"], VALUES),
    ),
)


def _translator() -> StreamTranslator:
    return StreamTranslator(response_id="resp_1", model="m", echo={})


def _seen(translator: StreamTranslator, events: list[dict]) -> tuple:
    """What a chunk did, without the random item ids."""
    return (
        [(e["type"], e.get("delta")) for e in events],
        ["".join(item.text) for item in translator.items],
        translator.finish_reason,
        translator.upstream_model,
        translator.output_cap.deltas,
    )


@settings(max_examples=1500, deadline=None)
@given(CHUNKS)
def test_the_fast_path_reads_a_chunk_as_the_typed_check_does(data):
    typed_calls = []

    def recording(chunk):
        typed_calls.append(chunk)
        return check_chunk(chunk)

    fast = _translator()
    original, stream_module.check_chunk = stream_module.check_chunk, recording
    try:
        try:
            fast_events = fast.feed(data)
        except BadChunk:
            return  # refused by the typed check: nothing to compare
    finally:
        stream_module.check_chunk = original
    if typed_calls:
        return  # the typed path itself
    checked = check_chunk(data)  # must not raise: the fast path took it
    typed = _translator()
    assert _seen(fast, fast_events) == _seen(typed, typed._feed_checked(checked))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"choices": [{"delta": {"content": 12345}}]}, "choices[0].delta.content"),
        ({"choices": [{"delta": {"reasoning": ["x"]}}]}, "choices[0].delta.reasoning"),
        ({"choices": [{"index": "a", "delta": {"content": "x"}}]}, "choices[0].index"),
        ({"choices": "abc"}, "choices"),
        ({"choices": [], "usage": [1]}, "usage"),
        ({"choices": [], "usage": {"prompt_tokens": -5}}, "usage.prompt_tokens"),
        ({"choices": [], "usage": {"completion_tokens": 2**31}}, "usage.completion_tokens"),
        (
            {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": {}}}]}}]},
            "choices[0].delta.tool_calls[0].function.arguments",
        ),
        ({"id": "x"}, ""),
    ],
)
def test_a_bad_chunk_is_refused_naming_its_field(data, field):
    with pytest.raises(BadChunk) as refused:
        _translator().feed(data)
    assert f"'{field}'" in str(refused.value) or not field
