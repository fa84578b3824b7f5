"""Compaction (docs/api/compaction.md): a conversation summarised by its own
model, carried by the client as one sealed ``compaction`` item.

A request asks for it with ``compaction_trigger`` as its last input item
(Codex's "v2" remote compaction), through ``POST /v1/responses/compact``, or
by passing its ``context_management`` threshold. The backend is then asked,
with the fixed :data:`SUMMARY_PROMPT` after the conversation, for a summary;
:class:`CompactionTranslator` turns its answer into one ``compaction`` item
whose ``encrypted_content`` is the summary sealed for the organisation and
bound to the model (``translate.sealing``). Sent back in ``input``, the item
gives the backend :func:`summary_message` of that summary, exactly.

Pure: no Django, no I/O.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import invalid
from responses_api.protocol.items import (
    CompactionItem,
    CompactionTriggerItem,
    InputItem,
    MessageItem,
)
from responses_api.translate.events import Event
from responses_api.translate.items import Item, new_id
from responses_api.translate.sealing import ReasoningSeal, SealBroken
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.token_usage import Usage, usage_dict

# The summarisation prompt, sent as the last user message after the
# conversation. Fixed, so that a summary depends only on the conversation.
SUMMARY_PROMPT = (
    "Stop here: do not answer, continue the task or call a tool. Write a summary of this "
    "conversation so far that lets you pick the work up again without it. Cover: what the "
    "user asked for, and every requirement, constraint and preference they stated; what has "
    "been done so far and what it showed (commands run, files changed, results, errors); the "
    "decisions taken and why; what is still to do, next step first; and any names, paths, "
    "values or snippets that will be needed exactly. Be complete but brief, as plain text."
)
# What the backend reads before a summary given back to it.
SUMMARY_PREFIX = "Summary of the conversation so far, written when it was compacted:"
# When the model wrote nothing, the item still says so rather than nothing.
EMPTY_SUMMARY = "(The model wrote no summary.)"
# Seconds between two ``response.compaction.compacting`` events.
COMPACTING_EVERY = 1.0
# OpenAI's own compaction blobs are Fernet tokens: this is how they start.
OPENAI_PREFIX = "gAAAA"


def context(model_id: str) -> str:
    """What a summary's token is bound to besides the organisation."""
    return f"compaction:{model_id}"


def summary_message(summary: str) -> str:
    """The user message a compaction item becomes for the backend."""
    return f"{SUMMARY_PREFIX}\n\n{summary}"


def open_summary(token: str, seal: ReasoningSeal, model_id: str, index: int) -> str:
    """The summary sealed in a compaction item's ``encrypted_content``.
    A token that does not open is refused, never dropped: the model would
    lose the conversation without anyone knowing."""
    param = f"input[{index}].encrypted_content"
    if not token.startswith("sy1."):
        whose = (
            "it is one OpenAI issued, which only OpenAI can read"
            if token.startswith(OPENAI_PREFIX)
            else "it was not issued by this server"
        )
        raise invalid(
            f"The compaction item input[{index}] cannot be used here: {whose}. Compact the "
            "conversation on this server (compaction_trigger or POST /v1/responses/compact) "
            "and send the compaction item it returns.",
            param=param,
            code="invalid_encrypted_content",
        )
    try:
        return seal.open(token, context(model_id))
    except SealBroken:
        raise invalid(
            f"The encrypted_content of the compaction item input[{index}] could not be "
            "verified: it was altered, or it was issued for another organisation or another "
            "model. Send the compaction item back as it was received, to the model that "
            "compacted the conversation.",
            param=param,
            code="invalid_encrypted_content",
        ) from None


@dataclass(slots=True)
class Compacting:
    """A request with its compaction items opened, and what its answer is
    when it asks for a compaction."""

    request: CreateResponse
    trigger: bool = False
    # The user messages of the compacted conversation, kept as they were.
    kept: list[MessageItem] = field(default_factory=list)
    seal: ReasoningSeal | None = None
    model_id: str = ""

    def translator(self, base: StreamTranslator, *, compacted: bool) -> StreamTranslator:
        """``base``, or the translator that answers the compaction asked for
        (``compacted``: in the ``response.compaction`` shape)."""
        if not self.trigger:
            return base
        assert self.seal is not None
        return CompactionTranslator(
            base, seal=self.seal, model_id=self.model_id, kept=self.kept, compacted=compacted
        )


def resolve(request: CreateResponse, *, seal: ReasoningSeal, model_id: str) -> Compacting:
    """Open the request's compaction items, and when its last input item is
    ``compaction_trigger``, make it the summarisation request (no tools,
    the conversation then :data:`SUMMARY_PROMPT`)."""
    if isinstance(request.input, str) or not any(
        isinstance(item, (CompactionTriggerItem, CompactionItem)) for item in request.input
    ):
        return Compacting(request)  # most requests: nothing to open or to do
    items: list[InputItem] = []
    kept: list[MessageItem] = []
    trigger = opened = False
    last = len(request.input) - 1
    for index, item in enumerate(request.input):
        if isinstance(item, CompactionTriggerItem):
            if index == last:
                trigger = True
            elif not isinstance(request.input[index + 1], CompactionItem):
                # Followed by its compaction item, it is an earlier turn of
                # a stored chain; anywhere else it is a mistake.
                raise invalid(
                    "compaction_trigger must be the last input item.",
                    param=f"input[{index}]",
                )
        elif isinstance(item, CompactionItem):
            summary = open_summary(item.encrypted_content, seal, model_id, index)
            items.append(MessageItem(role="user", content=summary_message(summary)))
            opened = True
        else:
            if isinstance(item, MessageItem) and item.role == "user" and not _summary(item):
                kept.append(item)
            items.append(item)
    if not trigger:
        if not opened:
            return Compacting(request)
        return Compacting(request.model_copy(update={"input": items}))
    return Compacting(
        summarisation(request, items), trigger=True, kept=kept, seal=seal, model_id=model_id
    )


def _summary(message: MessageItem) -> bool:
    """Whether ``message`` is an earlier summary (a newer one replaces it)."""
    return isinstance(message.content, str) and message.content.startswith(SUMMARY_PREFIX)


def threshold(request: CreateResponse, context_window: int | None) -> int | None:
    """The input tokens past which ``context_management`` compacts first:
    its ``compact_threshold``, else 80% of the model's context window."""
    for entry in request.context_management or ():
        if entry.compact_threshold is not None:
            return entry.compact_threshold
        if context_window:
            return context_window * 8 // 10
    return None


def after_compaction(request: CreateResponse, summary: str) -> CreateResponse:
    """The request once compacted ahead of its answer: the summary, then
    the user messages of its last turn (those after the last other item)."""
    items = (
        [MessageItem(role="user", content=request.input)]
        if isinstance(request.input, str)
        else list(request.input)
    )
    turn: list[InputItem] = []
    for item in reversed(items):
        if not (isinstance(item, MessageItem) and item.role == "user"):
            break
        turn.insert(0, item)
    compacted = [MessageItem(role="user", content=summary_message(summary)), *turn]
    return request.model_copy(update={"input": compacted, "previous_response_id": None})


def summarisation(request: CreateResponse, items: list[InputItem]) -> CreateResponse:
    """The request that asks the backend for a summary of ``items``."""
    if not items:
        raise invalid(
            "There is no conversation to compact before compaction_trigger.", param="input"
        )
    prompt = MessageItem(role="user", content=SUMMARY_PROMPT)
    return request.model_copy(
        update={
            "input": [*items, prompt],
            "tools": None,
            "tool_choice": None,
            "parallel_tool_calls": None,
            "max_tool_calls": None,
            "text": None,
            "include": None,
            "context_management": None,
        }
    )


def kept_item(message: MessageItem) -> dict[str, Any]:
    """A kept user message as an output item."""
    content = message.content
    parts = (
        [{"type": "input_text", "text": content}]
        if isinstance(content, str)
        else [part.model_dump(exclude_none=True) for part in content]
    )
    return {
        "id": message.id or new_id("msg"),
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": parts,
    }


class CompactionTranslator(StreamTranslator):
    """Reads the backend's summary without streaming it, and answers with
    one ``compaction`` item: alone (``compaction_trigger``), or after the
    kept user messages in the ``response.compaction`` object of
    ``POST /v1/responses/compact`` (``compacted``)."""

    def __init__(
        self,
        base: StreamTranslator,
        *,
        seal: ReasoningSeal,
        model_id: str,
        kept: list[MessageItem],
        compacted: bool,
    ) -> None:
        super().__init__(
            response_id=base.response_id,
            model=base.model,
            echo=base.echo,
            created_at=base.created_at,
            quiet=True,
            max_output_tokens=base.output_cap.max_output_tokens,
        )
        self.compact_seal = seal
        self.model_id = model_id
        self.kept = [kept_item(message) for message in kept] if compacted else []
        self.compacted = compacted
        self.compaction: dict[str, Any] | None = None
        self.item_id = new_id("cmp")
        self.quiet_until = 0.0

    def feed(self, data: dict[str, Any]) -> list[Event]:
        """Nothing of the summary; while it is written, a
        ``response.compaction.compacting`` now and then, so that a client's
        idle timer sees the stream alive."""
        super().feed(data)
        if self.first_token_at is None or self.quiet_until > time.monotonic():
            return []
        self.quiet_until = time.monotonic() + COMPACTING_EVERY
        index = len(self.kept)
        return [
            {
                "type": "response.compaction.compacting",
                "item_id": self.item_id,
                "output_index": index,
            }
        ]

    def summary(self) -> str:
        text = "".join("".join(item.text) for item in self.items if item.kind == "message").strip()
        return text or EMPTY_SUMMARY

    @property
    def cut(self) -> bool:
        """Whether the summary was cut at the token limit, by the backend or
        at the output cap (``translate.output_cap``)."""
        return self.finish_reason == "length" or self.output_cap.reached

    @property
    def status(self) -> tuple[str, str | None]:
        # A summary cut at the token limit still compacts: the conversation
        # goes on (an unfinished compaction would end a Codex session).
        if self.cut:
            return "completed", None
        return super().status

    def notices(self) -> list[tuple[str, str]]:
        if not self.cut:
            return super().notices()
        return [
            *super().notices(),
            (
                "compaction_summary_truncated",
                "The summary reached max_output_tokens and was cut short there.",
            ),
        ]

    def close_items(self, status: str | None = None) -> list[Event]:
        super().close_items(status)
        if self.compaction is not None:
            return []
        token = self.compact_seal.seal(self.summary(), context(self.model_id))
        item = {"id": self.item_id, "type": "compaction", "encrypted_content": token}
        self.compaction = item
        index = len(self.kept)
        return [
            {"type": "response.output_item.added", "output_index": index, "item": item},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]

    def output(self) -> list[dict[str, Any]]:
        return [*self.kept, self.compaction] if self.compaction is not None else []

    def response(self, status: str, **kwargs: Any) -> dict[str, Any]:
        if not self.compacted:
            return super().response(status, **kwargs)
        body: dict[str, Any] = {
            "id": self.response_id,
            "object": "response.compaction",
            "created_at": self.created_at,
            "output": self.output(),
            "usage": usage_dict(self.final_usage()),
        }
        extras = kwargs.get("extras")
        if extras is not None:
            body["switchyard"] = extras
        return body


def estimate_tokens(messages: list[dict[str, Any]], tools: Any) -> int:
    """The input's tokens where the backend cannot count them: a quarter of
    its JSON's bytes, the usual average for BPE vocabularies."""
    return (len(orjson.dumps(messages)) + (len(orjson.dumps(tools)) if tools else 0)) // 4


class AheadTranslator(StreamTranslator):
    """An answer after an automatic compaction (``context_management``): its
    first output item is the compaction item, and its usage holds the
    summary's too."""

    def __init__(self, base: StreamTranslator, *, item: dict[str, Any], usage: Usage) -> None:
        super().__init__(
            response_id=base.response_id,
            model=base.model,
            echo=base.echo,
            tools=base.tools,
            max_tool_calls=base.max_tool_calls,
            created_at=base.created_at,
            quiet=base.quiet,
            seal=base.closing.seal,
            max_output_tokens=base.output_cap.max_output_tokens,
        )
        self.items.append(Item("compaction", 0, item["id"], closed=True, done_item=item))
        self.ahead = usage

    def start(self, extras: dict[str, Any] | None = None) -> list[Event]:
        item = self.items[0].done_item
        started = super().start(extras)
        for event in started:
            event["response"]["output"] = []  # the item is announced next
        return [
            *started,
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ]

    def final_usage(self) -> Usage:
        return super().final_usage().plus(self.ahead)
