"""Chat Completions chunks → Responses stream events (docs/api/responses.md).

A small state machine: :meth:`StreamTranslator.feed` takes one decoded chat
chunk and returns the Responses events it implies; :meth:`finish` closes the
open items and returns the terminal event. Events are plain dicts without
``sequence_number`` (``pipeline.writers.EventWriter`` numbers them, in one place). The
same machine serves non-streaming requests: its final response is the body.

One item is open at a time: an item's ``output_item.added`` comes after the
previous item's ``output_item.done``, even when a backend interleaves the
arguments of parallel tool calls (what arrives early for a later call is
held back until the call before it is done).

What the events of each kind of item hold is ``translate.events``; the
tokens an answer used, ``translate.token_usage``. No Django, no httpx, no I/O.
"""

from __future__ import annotations

import time
from typing import Any

from responses_api.translate.chunks import Chunk, Delta, ToolCallDelta, check_chunk
from responses_api.translate.events import (
    Closing,
    Event,
    call_added,
    call_arguments,
    call_closed,
    text_closed,
    text_opened,
)
from responses_api.translate.items import Item, append_text, new_call, new_id, whole_json
from responses_api.translate.output_cap import ITEM_CHARS, OutputCap
from responses_api.translate.response import envelope
from responses_api.translate.sealing import ReasoningSeal
from responses_api.translate.token_usage import Usage, usage_dict
from responses_api.translate.tools import ToolRef

__all__ = ["StreamTranslator"]

# The keys of a choice, and of its delta, that the fast path of
# ``StreamTranslator.feed`` reads (or may ignore): any other goes through
# the typed check.
_TEXT_CHOICE = frozenset({"index", "delta", "finish_reason", "logprobs"})
_TEXT_DELTA = frozenset({"role", "content", "reasoning_content", "reasoning", "refusal"})


class StreamTranslator:
    def __init__(
        self,
        *,
        response_id: str,
        model: str,
        echo: dict[str, Any],
        tools: dict[str, ToolRef] | None = None,
        max_tool_calls: int | None = None,
        created_at: float | None = None,
        quiet: bool = False,
        seal: ReasoningSeal | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        self.response_id = response_id
        # A non-streamed answer needs only the final response: no event per token.
        self.quiet = quiet
        self.model = model
        self.echo = echo
        self.tools = tools or {}
        self.max_tool_calls = max_tool_calls
        self.closing = Closing(seal)  # seals reasoning, cites sources
        self.created_at = int(created_at if created_at is not None else time.time())
        self.items: list[Item] = []
        self.open_text: Item | None = None  # the message or reasoning item being written
        self.calls: dict[int, Item] = {}  # chat tool-call index → item
        # The call being written, and those that arrived before it was done.
        self.active_call: Item | None = None
        self.waiting: list[Item] = []
        self.dropped_calls: set[int] = set()
        self.usage = Usage()
        # The backend calls before this one, when the gateway runs tools
        # between calls (``translate.tool_turns``): their usage, and the
        # deltas counted until this call began (output, reasoning).
        self.earlier: tuple[Usage, int, int] | None = None
        self.finish_reason: str | None = None
        self.first_token_at: float | None = None
        self.upstream_model: str | None = None
        self.output_cap = OutputCap(max_output_tokens)

    # --- lifecycle -----------------------------------------------------------

    def start(self, extras: dict[str, Any] | None = None) -> list[Event]:
        response = self.response("in_progress", extras=extras, with_usage=False)
        return [
            {"type": "response.created", "response": response},
            {"type": "response.in_progress", "response": response},
        ]

    def keepalive(self, extras: dict[str, Any] | None = None) -> Event:
        return {
            "type": "response.in_progress",
            "response": self.response("in_progress", extras=extras, with_usage=False),
        }

    # --- chunks --------------------------------------------------------------

    def feed(self, data: dict[str, Any]) -> list[Event]:
        """The events one backend chunk implies; :class:`BadChunk` for a
        chunk that is not Chat Completions.

        Nearly every chunk is one choice with a text delta: its fields are
        read once and checked as they are read (:data:`_TEXT_CHOICE`).
        Any other chunk (usage, tool calls, anything odd) takes the typed
        check of :func:`check_chunk` first, which would be a large share of
        the event loop's instructions per relayed token (bench/README.md). The fast
        path may only take chunks the typed check accepts unchanged
        (``tests/translate/test_chunks.py``). Past the output cap, no chunk is read."""
        if self.output_cap.reached:
            return []
        choices = data.get("choices")
        if type(choices) is list and len(choices) == 1 and data.get("usage") is None:
            choice = choices[0]
            if type(choice) is dict and choice.keys() <= _TEXT_CHOICE:
                delta = choice.get("delta")
                if delta is None or (type(delta) is dict and delta.keys() <= _TEXT_DELTA):
                    delta = delta or {}
                    reasoning_content = delta.get("reasoning_content")
                    reasoning = delta.get("reasoning")
                    content = delta.get("content")
                    refusal = delta.get("refusal")
                    index = choice.get("index")
                    reason = choice.get("finish_reason")
                    model = data.get("model")
                    if (
                        (reasoning_content is None or type(reasoning_content) is str)
                        and (reasoning is None or type(reasoning) is str)
                        and (content is None or type(content) is str)
                        and (refusal is None or type(refusal) is str)
                        and (index is None or type(index) is int)
                        and (reason is None or type(reason) is str)
                        and (model is None or type(model) is str)
                    ):
                        if self.upstream_model is None:
                            self.upstream_model = model
                        events: list[Event] = []
                        if not index:
                            self._texts(reasoning_content or reasoning, content, refusal, events)
                            if reason:
                                self.finish_reason = reason
                        return events
        return self._feed_checked(check_chunk(data))

    def _feed_checked(self, chunk: Chunk) -> list[Event]:
        events: list[Event] = []
        usage = chunk.get("usage")
        if usage:
            self.usage.take(usage)
        if self.upstream_model is None:
            self.upstream_model = chunk.get("model")
        for choice in chunk.get("choices") or ():
            if choice.get("index") or 0:
                continue
            delta: Delta = choice.get("delta") or choice.get("message") or {}
            # Servers name reasoning differently: vLLM (< 0.10), SGLang and
            # llama.cpp send `reasoning_content`; vLLM ≥ 0.10 and Ollama `reasoning`.
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            self._texts(reasoning, delta.get("content"), delta.get("refusal"), events)
            for position, call in enumerate(delta.get("tool_calls") or ()):
                self._tool_delta(call, position, events)
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reason = reason
        return events

    def _texts(
        self, reasoning: str | None, content: str | None, refusal: str | None, events: list[Event]
    ) -> None:
        if reasoning:
            self._text_delta("reasoning", reasoning, events)
        if content:
            self._text_delta("message", content, events)
        if refusal:
            self._text_delta("message", refusal, events)

    def _mark_token(self) -> None:
        self.output_cap.deltas += 1
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    def _text_delta(self, kind: str, text: str, events: list[Event]) -> None:
        self._mark_token()
        if (room := self.output_cap.room(len(text))) < len(text):
            if not room:
                return
            text = text[:room]
        item = self.open_text
        if item is None or item.kind != kind:
            if item is not None:
                events.extend(self._close(item))
            elif self.active_call is not None:
                # Text after tool calls: the calls are over.
                self._close_calls(events, "completed")
            item = self._open(kind, events)
            self.open_text = item
        if kind == "reasoning":
            self.output_cap.reasoning_deltas += 1
        append_text(item.text, text)
        if self.quiet:
            return
        events.append(
            {
                "type": "response.output_text.delta"
                if kind == "message"
                else "response.reasoning_text.delta",
                "item_id": item.item_id,
                "output_index": item.output_index,
                "content_index": 0,
                "delta": text,
                **({"logprobs": []} if kind == "message" else {}),
            }
        )

    def _open(self, kind: str, events: list[Event]) -> Item:
        self.output_cap.room(ITEM_CHARS)
        item = Item(kind, len(self.items), new_id("msg" if kind == "message" else "rs"))
        self.items.append(item)
        events.extend(text_opened(item))
        return item

    def _tool_delta(self, call: ToolCallDelta, position: int, events: list[Event]) -> None:
        index = call.get("index")
        if index is None:
            index = position
        if index in self.dropped_calls:
            return
        item = self.calls.get(index)
        function = call.get("function") or {}
        if item is None:
            if self.max_tool_calls is not None and len(self.calls) >= self.max_tool_calls:
                self.dropped_calls.add(index)
                return
            if self.output_cap.room(ITEM_CHARS) < ITEM_CHARS:
                return
            if self.open_text is not None:
                events.extend(self._close(self.open_text))
                self.open_text = None
            item = new_call(call.get("id"), function.get("name") or "", self.tools)
            self.calls[index] = item
            if self.active_call is None:
                self._start_call(item, events)
            else:
                self.waiting.append(item)
        arguments = function.get("arguments")
        if arguments and not self.output_cap.reached:
            self._mark_token()
            arguments = arguments[: self.output_cap.room(len(arguments))]
            if not arguments or item.closed:
                # More for a call already done: it was complete JSON when the
                # backend moved on, so this can only be trailing junk.
                return
            append_text(item.text, arguments)
            if item is self.active_call:
                call_arguments(item, arguments, events)
        if self.waiting:
            self._advance(events)

    def _advance(self, events: list[Event]) -> None:
        """Close the active call once its arguments are a whole JSON value and
        another call waits: the backend has moved on (vLLM and SGLang send
        calls one after another; some backends interleave them)."""
        while self.waiting and self.active_call is not None:
            active = self.active_call
            if not whole_json(active.text):
                return
            events.extend(self._close(active))
            self._start_call(self.waiting.pop(0), events)

    def _start_call(self, item: Item, events: list[Event]) -> None:
        """The call's ``output_item.added``, then what it received while it waited."""
        item.output_index = len(self.items)
        self.items.append(item)
        self.active_call = item
        events.extend(call_added(item))
        if item.text:
            call_arguments(item, "".join(item.text), events)

    # --- closing -------------------------------------------------------------

    def _close(self, item: Item, status: str = "completed") -> list[Event]:
        """The events that end ``item``; ``status`` is ``incomplete`` for an
        item cut short (the answer hit its limit, or failed)."""
        item.closed = True
        if item is self.active_call:
            self.active_call = None
        if item.kind == "message" or item.kind == "reasoning":
            return text_closed(item, status, self.closing)
        return call_closed(item, status)

    def close_items(self, status: str | None = None) -> list[Event]:
        """Close the open item, then the calls still waiting, in order;
        ``status`` is what the items still open get (by default, the
        answer's: ``incomplete`` when it was cut short)."""
        if status is None:
            status = self.status[0]
        events: list[Event] = []
        for item in self.items:
            if not item.closed:
                events.extend(self._close(item, status))
        self.open_text = None
        self._close_calls(events, status)
        return events

    def _close_calls(self, events: list[Event], status: str) -> None:
        if self.active_call is not None:
            events.extend(self._close(self.active_call, status))
        while self.waiting:
            item = self.waiting.pop(0)
            self._start_call(item, events)
            events.extend(self._close(item, status))

    @property
    def status(self) -> tuple[str, str | None]:
        if self.finish_reason == "length" or self.output_cap.reached:
            return "incomplete", "max_output_tokens"
        if self.finish_reason == "content_filter":
            return "incomplete", "content_filter"
        return "completed", None

    def finish(self, extras: dict[str, Any] | None = None) -> list[Event]:
        """Close every item and end with response.completed or response.incomplete."""
        status, reason = self.status
        events = self.close_items(status)
        response = self.response(status, extras=extras, incomplete_reason=reason)
        events.append({"type": f"response.{status}", "response": response})
        return events

    def fail(self, code: str, message: str, extras: dict[str, Any] | None = None) -> list[Event]:
        """End a started stream with response.failed: the items
        it cut short say so."""
        events = self.close_items("incomplete")
        response = self.response("failed", extras=extras, error={"code": code, "message": message})
        events.append({"type": "response.failed", "response": response})
        return events

    def notices(self) -> list[tuple[str, str]]:
        """What the client should know of the answer as translated (``code``,
        ``message``), for ``switchyard.notices``."""
        notices = self.final_usage().notice()
        if self.dropped_calls:
            dropped = len(self.dropped_calls)
            plural = dropped > 1
            notices.append(
                (
                    "tool_calls_dropped",
                    f"max_tool_calls is {self.max_tool_calls}: the model made {dropped} more "
                    f"tool call{'s' if plural else ''}, which {'were' if plural else 'was'} "
                    "dropped.",
                )
            )
        return notices

    # --- the response object -----------------------------------------------------

    def output(self) -> list[dict[str, Any]]:
        out = []
        for item in self.items:
            if item.done_item is not None:
                out.append(item.done_item)
        return out

    def response(
        self,
        status: str,
        *,
        extras: dict[str, Any] | None = None,
        incomplete_reason: str | None = None,
        error: dict[str, Any] | None = None,
        with_usage: bool = True,
    ) -> dict[str, Any]:
        return envelope(
            response_id=self.response_id,
            created_at=self.created_at,
            model=self.model,
            echo=self.echo,
            status=status,
            output=self.output(),
            usage=usage_dict(self.final_usage()) if with_usage else None,
            incomplete_reason=incomplete_reason,
            error=error,
            completed_at=int(time.time()) if status == "completed" else None,
            extras=extras,
        )

    def final_usage(self) -> Usage:
        output = self.output_cap
        if self.earlier is None:
            return self.usage.final(output.deltas, output.reasoning_deltas)
        before, deltas, reasoning = self.earlier
        return before.plus(
            self.usage.final(output.deltas - deltas, output.reasoning_deltas - reasoning)
        )
