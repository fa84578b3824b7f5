"""The tokens an answer used, as the backend reports them or as estimated.

A backend reports usage in its last chunk (``stream_options.include_usage``),
but not every backend does, and a stream cut short never gets there: then
each delta counts as about one token.

Its counts are untrusted like the rest of its answer, and they are billed:
each one within bounds (``translate.chunks``) can still be impossible
together — 10⁸ cached tokens of a 10-token prompt once cost a tenant 50.00.
What is kept is held to what is possible (cached tokens within the input,
reasoning within the output, the total always their sum), here, where every
answer's usage enters, and what was cut is said (:data:`CORRECTED`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from responses_api.translate.chunks import MAX_COUNT, ChunkUsage

# The notice of an answer whose backend reported impossible counts.
CORRECTED = "backend_usage_corrected"


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    reported: bool = False
    # What the backend's last report claimed past the possible, as people
    # read it ("100 cached of 10 input tokens"); empty when nothing was cut.
    corrected: tuple[str, ...] = ()

    def take(self, usage: ChunkUsage) -> None:
        """Keep what a chunk reports, held to what is possible."""
        self.reported = True
        self.input_tokens = input_tokens = int(usage.get("prompt_tokens") or 0)
        self.output_tokens = output = int(usage.get("completion_tokens") or 0)
        details = usage.get("prompt_tokens_details") or {}
        # llama.cpp and some vLLM versions put cached tokens at the top level.
        cached = int(details.get("cached_tokens") or usage.get("cached_tokens") or 0)
        out_details = usage.get("completion_tokens_details") or {}
        reasoning = int(out_details.get("reasoning_tokens") or 0)
        self.cached_tokens = min(cached, input_tokens)
        self.reasoning_tokens = min(reasoning, output)
        corrected = []
        if cached > input_tokens:
            corrected.append(f"{cached} cached of {input_tokens} input tokens")
        if reasoning > output:
            corrected.append(f"{reasoning} reasoning of {output} output tokens")
        # Never read as a count (the total is the sum of the parts); only
        # said when it disagrees with them.
        total = usage.get("total_tokens")
        if type(total) is int and total != input_tokens + output:
            corrected.append(f"a total of {total} for {input_tokens + output} tokens")
        self.corrected = tuple(corrected)

    def final(self, deltas: int, reasoning_deltas: int) -> Usage:
        """The usage to account, given the deltas seen (of them, reasoning)."""
        if not self.reported:
            # No usage from the server (yet): count deltas, about a token each.
            return Usage(output_tokens=deltas, reasoning_tokens=reasoning_deltas)
        if not self.reasoning_tokens and reasoning_deltas:
            self.reasoning_tokens = min(reasoning_deltas, self.output_tokens)
        return self

    def plus(self, other: Usage) -> Usage:
        """Two answers' usage together (a compaction and the answer after
        it), each sum held to a count the usage row can keep."""
        corrected = (*self.corrected, *other.corrected)
        counts = []
        for name, mine, theirs in (
            ("input", self.input_tokens, other.input_tokens),
            ("cached", self.cached_tokens, other.cached_tokens),
            ("output", self.output_tokens, other.output_tokens),
            ("reasoning", self.reasoning_tokens, other.reasoning_tokens),
        ):
            if mine + theirs > MAX_COUNT:
                corrected = (*corrected, f"{mine + theirs} {name} tokens over two calls")
            counts.append(min(mine + theirs, MAX_COUNT))
        input_tokens, cached, output, reasoning = counts
        return Usage(
            input_tokens, cached, output, reasoning, reported=self.reported, corrected=corrected
        )

    def notice(self) -> list[tuple[str, str]]:
        """The notice of a correction (``switchyard.notices``), if any."""
        if not self.corrected:
            return []
        return [
            (
                CORRECTED,
                f"The backend reported impossible usage ({'; '.join(self.corrected)}): "
                "cached tokens count at most the input tokens, reasoning tokens at most the "
                f"output tokens, the total is input plus output, and no count passes {MAX_COUNT}.",
            )
        ]


def usage_dict(usage: Usage) -> dict[str, Any]:
    """The ``usage`` of a response object."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
