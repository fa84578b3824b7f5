"""Cutting text into overlapping chunks by tokens, as OpenAI's
``chunking_strategy`` defines it: ``auto`` (800 tokens, 400 overlapping)
or ``static`` (``max_chunk_size_tokens`` 100..4096, ``chunk_overlap_tokens``
at most half of it).

Tokens are estimated, deterministically and with no vocabulary to load:
a run of at most five letters, of at most three digits (as cl100k cuts
numbers), or one other character, each with the whitespace before it.
English prose comes out near four characters a token, a little above what
cl100k counts (so a chunk never holds more real tokens than its cap says);
the pieces are the cut points, so a chunk never splits a character.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from responses_api.retrieval.errors import InvalidParameter

TOKEN = re.compile(r"\s*(?:[^\W\d_]{1,5}|\d{1,3}|[^\s])|\s+$")
AUTO_MAX, AUTO_OVERLAP = 800, 400
MIN_TOKENS, MAX_TOKENS = 100, 4096


@dataclass(frozen=True)
class Strategy:
    max_tokens: int
    overlap: int

    def as_json(self) -> dict[str, Any]:
        """As OpenAI reports a file's strategy (``auto`` shows its values)."""
        return {
            "type": "static",
            "static": {
                "max_chunk_size_tokens": self.max_tokens,
                "chunk_overlap_tokens": self.overlap,
            },
        }


def strategy_parse(value: dict[str, Any] | None) -> Strategy:
    """The strategy a request gives (``chunking_strategy``), checked."""
    if value is None or value == {"type": "auto"}:
        return Strategy(AUTO_MAX, AUTO_OVERLAP)
    param = "chunking_strategy"
    if not isinstance(value, dict) or value.get("type") not in ("auto", "static"):
        raise InvalidParameter("chunking_strategy.type must be 'auto' or 'static'.", param)
    if value["type"] == "auto" or set(value) != {"type", "static"}:
        raise InvalidParameter(
            "chunking_strategy takes {'type': 'auto'} or {'type': 'static', 'static': {...}}.",
            param,
        )
    static = value["static"]
    if not isinstance(static, dict) or set(static) != {
        "max_chunk_size_tokens",
        "chunk_overlap_tokens",
    }:
        raise InvalidParameter(
            "chunking_strategy.static takes max_chunk_size_tokens and chunk_overlap_tokens.",
            f"{param}.static",
        )
    size, overlap = static["max_chunk_size_tokens"], static["chunk_overlap_tokens"]
    if type(size) is not int or not MIN_TOKENS <= size <= MAX_TOKENS:
        raise InvalidParameter(
            f"max_chunk_size_tokens must be an integer from {MIN_TOKENS} to {MAX_TOKENS}.",
            f"{param}.static.max_chunk_size_tokens",
        )
    if type(overlap) is not int or not 0 <= overlap <= size // 2:
        raise InvalidParameter(
            "chunk_overlap_tokens must be an integer from 0 to half of max_chunk_size_tokens.",
            f"{param}.static.chunk_overlap_tokens",
        )
    return Strategy(size, overlap)


def token_starts(text: str) -> list[int]:
    """Where each estimated token starts, and the text's end last."""
    starts = [match.start() for match in TOKEN.finditer(text)]
    starts.append(len(text))
    return starts


def count_tokens(text: str) -> int:
    return len(token_starts(text)) - 1


@dataclass(frozen=True)
class TextChunk:
    position: int
    text: str
    tokens: int


def chunk_text(text: str, strategy: Strategy) -> Iterator[TextChunk]:
    """Windows of ``max_tokens`` tokens, each starting ``max_tokens -
    overlap`` tokens after the one before; the last ends at the text's end."""
    starts = token_starts(text)
    total = len(starts) - 1
    stride = strategy.max_tokens - strategy.overlap
    position = first = 0
    while first < total:
        last = min(first + strategy.max_tokens, total)
        piece = text[starts[first] : starts[last]].strip()
        if piece:
            yield TextChunk(position, piece, last - first)
            position += 1
        if last == total:
            break
        first += stride
