"""The tokens an answer used, as the backend reports them or as estimated.

A backend reports usage in its last chunk (``stream_options.include_usage``),
but not every backend does, and a stream cut short never gets there: then
each delta counts as about one token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from responses_api.translate.chunks import ChunkUsage


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    reported: bool = False

    def take(self, usage: ChunkUsage) -> None:
        """Keep what a chunk reports."""
        self.reported = True
        self.input_tokens = int(usage.get("prompt_tokens") or 0)
        self.output_tokens = int(usage.get("completion_tokens") or 0)
        details = usage.get("prompt_tokens_details") or {}
        # llama.cpp and some vLLM versions put cached tokens at the top level.
        self.cached_tokens = int(details.get("cached_tokens") or usage.get("cached_tokens") or 0)
        out_details = usage.get("completion_tokens_details") or {}
        self.reasoning_tokens = int(out_details.get("reasoning_tokens") or 0)

    def final(self, deltas: int, reasoning_deltas: int) -> Usage:
        """The usage to account, given the deltas seen (of them, reasoning)."""
        if not self.reported:
            # No usage from the server (yet): count deltas, about a token each.
            return Usage(output_tokens=deltas, reasoning_tokens=reasoning_deltas)
        if not self.reasoning_tokens and reasoning_deltas:
            self.reasoning_tokens = min(reasoning_deltas, self.output_tokens)
        return self


def usage_dict(usage: Usage) -> dict[str, Any]:
    """The ``usage`` of a response object."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
