"""The chat messages a request's input becomes.

Chat Completions has no items: a call is part of the assistant message
before it, and prior reasoning rides on that message in a field whose name
depends on the backend. :class:`ChatMessages` builds the list in the order
the items came, with the reasoning under :data:`DRAFT_REASONING_FIELD`;
:func:`rename_reasoning` gives a route whose dialect names it otherwise
copies of just those messages, so one translation serves every route.

Sans-I/O, like the rest of ``translate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from responses_api.protocol.items import ContentPart
from responses_api.translate.content import text_of

# The field a draft's assistant messages give prior reasoning back in.
DRAFT_REASONING_FIELD = "reasoning_content"


class ChatMessages:
    """Accumulates chat messages, merging assistant turns with their calls."""

    def __init__(self) -> None:
        self.system: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.pending_reasoning: list[str] = []

    def assistant(self) -> dict[str, Any]:
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant" or last.get("_closed"):
            last = {"role": "assistant", "content": None}
            self.messages.append(last)
        if self.pending_reasoning:
            previous = last.get(DRAFT_REASONING_FIELD) or ""
            last[DRAFT_REASONING_FIELD] = previous + "".join(self.pending_reasoning)
            self.pending_reasoning = []
        return last

    def add_user(self, content: str | list[dict[str, Any]]) -> None:
        self.messages.append({"role": "user", "content": content})

    def add_assistant(self, content: str | Sequence[ContentPart]) -> None:
        message = self.assistant()
        if message.get("tool_calls"):
            # Text after a call within one turn starts a new message.
            message["_closed"] = True
            message = self.assistant()
        message["content"] = (message["content"] or "") + text_of(content)

    def add_call(self, call: dict[str, Any]) -> None:
        self.assistant().setdefault("tool_calls", []).append(call)

    def add_tool_result(self, call_id: str, output: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})

    def result(self) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
        """The chat messages, and the indexes of those that carry reasoning."""
        out = []
        if self.system:
            out.append({"role": "system", "content": "\n\n".join(self.system)})
        reasoning_at = []
        for message in self.messages:
            message.pop("_closed", None)
            if (
                message["role"] == "assistant"
                and message.get("content") is None
                and not message.get("tool_calls")
            ):
                message["content"] = ""
            if DRAFT_REASONING_FIELD in message:
                reasoning_at.append(len(out))
            out.append(message)
        return out, tuple(reasoning_at)


def rename_reasoning(
    messages: list[dict[str, Any]], at: Sequence[int], name: str
) -> list[dict[str, Any]]:
    """A copy of the list in which the messages at ``at`` are copies that
    carry their reasoning under ``name``; the others are shared."""
    out = list(messages)
    for index in at:
        out[index] = {
            (name if key == DRAFT_REASONING_FIELD else key): value
            for key, value in messages[index].items()
        }
    return out
