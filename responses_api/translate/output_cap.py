"""How much of an answer the gateway holds (docs/operations/limits.md).

A backend is asked for at most ``max_tokens`` tokens, but nothing makes it
stop there, and what it sends is kept until the response ends: the text of
every output item, for the final response (streamed or not) and a
compaction's sealed summary. So an answer is read only up to its *output
cap*, the request's output limit in tokens turned into characters with a
margin no real answer needs; past it the backend is hung up on.

Characters, not bytes: ``len`` of a delta costs nothing on the hot path,
and a character is at most 4 bytes of UTF-8 (or of a Python string).

Pure: no I/O.
"""

from __future__ import annotations

__all__ = [
    "CHARS_PER_TOKEN",
    "ITEM_CHARS",
    "OUTPUT_ALLOWANCE",
    "OutputCap",
    "MAX_CAPPED_TOKENS",
    "output_cap",
]

CHARS_PER_TOKEN = 16
"""Characters one output token may carry. BPE tokens average about 4
characters of text and 3 of code; the long ones (runs of spaces or dashes)
reach 16 and more, but an answer made only of them is no answer. Four times
the average lets any real answer of ``max_tokens`` tokens through whole:
one that is longer came from a backend that ignored its limit or is lying."""

OUTPUT_ALLOWANCE = 16 * 1024
"""Characters allowed on top of ``CHARS_PER_TOKEN`` per token, so that a
small limit (``max_output_tokens: 1``) still takes what a backend may send
around its tokens: a tool call's name and the first characters past it."""

ITEM_CHARS = 256
"""What each output item counts for, besides its text: an item costs about a
kilobyte, so a backend alternating reasoning and text one character at a
time cannot make a million items within the cap."""

MAX_CAPPED_TOKENS = 128 * 1024
"""The most tokens a cap allows for: the limit of a request when neither it
nor its model sets one (a limit taken from the context window can be a
million tokens), and the ceiling of a larger one. No model in use today
writes more in one answer; real answers of this many tokens are a quarter
of the cap's characters."""


def output_cap(max_output_tokens: int | None) -> int:
    """The characters an answer limited to ``max_output_tokens`` may hold
    (``None``: no limit set)."""
    tokens = MAX_CAPPED_TOKENS if max_output_tokens is None else max(max_output_tokens, 0)
    return min(tokens, MAX_CAPPED_TOKENS) * CHARS_PER_TOKEN + OUTPUT_ALLOWANCE


class OutputCap:
    """What an answer has produced so far: the characters its items hold,
    against its cap, and its deltas (content, reasoning, arguments), about a
    token each: the count of tokens when the backend reports none."""

    __slots__ = ("cap", "deltas", "held", "max_output_tokens", "reached", "reasoning_deltas")

    def __init__(self, max_output_tokens: int | None) -> None:
        self.max_output_tokens = max_output_tokens
        self.cap = output_cap(max_output_tokens)
        self.held = 0
        # Once reached, nothing more of the answer is read.
        self.reached = False
        self.deltas = 0
        self.reasoning_deltas = 0

    def room(self, size: int) -> int:
        """How many of ``size`` more characters fit; counts them."""
        self.held += size
        if self.held <= self.cap:
            return size
        self.reached = True
        size -= self.held - self.cap
        self.held = self.cap
        return max(size, 0)

    def miscounted(self, output_tokens: int | None) -> bool:
        """Whether the answer, cut at the cap, holds more than the count of
        output tokens its backend gave (None: it gave none) can be: that
        count was false, and the answer is the backend's fault (failed), not
        a limit reached (incomplete)."""
        return self.reached and output_tokens is not None and self.held > output_cap(output_tokens)
