"""Chunks stay within the strategy's bounds and overlap as it says."""

from __future__ import annotations

import pytest

from responses_api.retrieval.chunking import (
    Strategy,
    chunk_text,
    count_tokens,
    strategy_parse,
)
from responses_api.retrieval.errors import InvalidParameter

TEXT = " ".join(f"word{i} is number {i}." for i in range(3000))


def test_auto_is_800_tokens_with_400_overlapping():
    assert strategy_parse(None) == Strategy(800, 400)
    assert strategy_parse({"type": "auto"}).as_json() == {
        "type": "static",
        "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400},
    }


@pytest.mark.parametrize("size, overlap", [(100, 0), (100, 50), (800, 400), (4096, 2048)])
def test_every_chunk_is_within_its_size_and_overlaps_the_next(size, overlap):
    chunks = list(chunk_text(TEXT, Strategy(size, overlap)))
    assert all(count_tokens(chunk.text) <= size for chunk in chunks)
    assert all(chunk.tokens <= size for chunk in chunks)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    # The text is covered: it starts the first chunk and ends the last.
    assert TEXT.startswith(chunks[0].text) and TEXT.endswith(chunks[-1].text)
    if overlap and len(chunks) > 1:
        tail = chunks[0].text[-20:]
        assert tail in chunks[1].text
    else:
        assert chunks[0].text[-20:] not in chunks[1].text


def test_a_short_text_is_one_chunk():
    assert [c.text for c in chunk_text("Just this.", Strategy(100, 50))] == ["Just this."]


@pytest.mark.parametrize(
    "static, param",
    [
        ({"max_chunk_size_tokens": 99, "chunk_overlap_tokens": 0}, "max_chunk_size_tokens"),
        ({"max_chunk_size_tokens": 4097, "chunk_overlap_tokens": 0}, "max_chunk_size_tokens"),
        ({"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 101}, "chunk_overlap_tokens"),
        ({"max_chunk_size_tokens": 200, "chunk_overlap_tokens": -1}, "chunk_overlap_tokens"),
        ({"max_chunk_size_tokens": "200", "chunk_overlap_tokens": 0}, "max_chunk_size_tokens"),
    ],
)
def test_a_static_strategy_out_of_bounds_is_refused_naming_the_field(static, param):
    with pytest.raises(InvalidParameter) as raised:
        strategy_parse({"type": "static", "static": static})
    assert raised.value.param.endswith(param)


def test_the_token_estimate_is_near_four_characters_a_token_for_prose():
    prose = "The quick brown fox jumps over the lazy dog while the cat watches. " * 50
    assert 3.0 <= len(prose) / count_tokens(prose) <= 5.0
