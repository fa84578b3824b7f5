"""The stream events that open, fill and close each kind of output item.

One builder per moment of an item's life, for the stream translator
(``translate.stream``), which decides when an item opens and closes; here is
only what the client is sent then. A text delta's event is built by the
translator itself: it is the one event per token. Events are plain dicts
without ``sequence_number`` (``pipeline.writers.EventWriter`` numbers them, in one place).

Pure: the builders touch nothing but the item they are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from responses_api.translate.citations import Annotator
from responses_api.translate.hosted_calls import SHAPES
from responses_api.translate.items import Item, call_item
from responses_api.translate.response import message_item
from responses_api.translate.sealing import ReasoningSeal

Event = dict[str, Any]


@dataclass(slots=True)
class Closing:
    """What a text item gets as it closes: the seal of its reasoning, when
    the client asked for ``reasoning.encrypted_content``, and the citations
    of an answer written after a web search (``translate.citations``)."""

    seal: ReasoningSeal | None = None
    annotate: Annotator | None = None


def text_opened(item: Item) -> list[Event]:
    """A message or reasoning item starts, with its one content part."""
    added: dict[str, Any]
    if item.kind == "message":
        added = {
            "id": item.item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    else:
        added = {
            "id": item.item_id,
            "type": "reasoning",
            "summary": [],
            "content": [],
            "status": "in_progress",
        }
        part = {"type": "reasoning_text", "text": ""}
    return [
        {"type": "response.output_item.added", "output_index": item.output_index, "item": added},
        {
            "type": "response.content_part.added",
            "item_id": item.item_id,
            "output_index": item.output_index,
            "content_index": 0,
            "part": part,
        },
    ]


def text_closed(item: Item, status: str, closing: Closing) -> list[Event]:
    """A message or reasoning item ends (``closing``: its seal, its citations)."""
    text = "".join(item.text)
    base = {"item_id": item.item_id, "output_index": item.output_index}
    seal = closing.seal
    if item.kind == "message":
        annotations = closing.annotate(text) if closing.annotate is not None else []
        done = message_item(item.item_id, text, status, annotations)
        item.done_item = done
        part = done["content"][0]
        return [
            *(
                {
                    "type": "response.output_text.annotation.added",
                    **base,
                    "content_index": 0,
                    "annotation_index": index,
                    "annotation": annotation,
                }
                for index, annotation in enumerate(annotations)
            ),
            {
                "type": "response.output_text.done",
                **base,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            },
            {"type": "response.content_part.done", **base, "content_index": 0, "part": part},
            {"type": "response.output_item.done", "output_index": item.output_index, "item": done},
        ]
    part = {"type": "reasoning_text", "text": text}
    done = {
        "id": item.item_id,
        "type": "reasoning",
        "summary": [],
        "content": [part],
        "status": status,
    }
    if seal is not None:
        done["encrypted_content"] = seal.seal(text)
    item.done_item = done
    return [
        {"type": "response.reasoning_text.done", **base, "content_index": 0, "text": text},
        {"type": "response.content_part.done", **base, "content_index": 0, "part": part},
        {"type": "response.output_item.done", "output_index": item.output_index, "item": done},
    ]


def call_added(item: Item) -> list[Event]:
    shape = SHAPES.get(item.ref.kind) if item.ref is not None else None
    if shape is not None:
        return [
            {
                "type": "response.output_item.added",
                "output_index": item.output_index,
                "item": shape.added(item),
            },
            *shape.opened(item),
        ]
    added: Event = {
        "type": "response.output_item.added",
        "output_index": item.output_index,
        "item": call_item(item, "in_progress", added=True),
    }
    if item.kind == "mcp_approval_request":
        return []  # announced whole, once its id is sealed (``tool_turns.approval_requested``)
    if item.kind != "mcp_call":
        return [added]
    base = {"item_id": item.item_id, "output_index": item.output_index}
    return [added, {"type": "response.mcp_call.in_progress", **base}]


def call_arguments(item: Item, arguments: str, events: list[Event]) -> None:
    """What a piece of a call's arguments shows the client: itself for a
    function call, the part of the custom tool's input it completes for a
    custom tool call (nothing for a tool search)."""
    if item.kind == "function_call" or item.kind == "mcp_call":
        kind = "function_call" if item.kind == "function_call" else "mcp_call"
        events.append(
            {
                "type": f"response.{kind}_arguments.delta",
                "item_id": item.item_id,
                "output_index": item.output_index,
                "delta": arguments,
            }
        )
    elif item.decoder is not None:
        decoded = item.decoder.feed(arguments)
        if decoded:
            events.append(custom_delta(item, decoded))


def custom_delta(item: Item, text: str) -> Event:
    item.streamed.append(text)
    return {
        "type": "response.custom_tool_call_input.delta",
        "item_id": item.item_id,
        "output_index": item.output_index,
        "delta": text,
    }


def call_closed(item: Item, status: str) -> list[Event]:
    """A tool call ends, with its arguments (or input) whole. An MCP call's
    arguments are whole, but the call is not done: it is ``calling`` until
    the gateway has run it (``translate.tool_turns.mcp_result``)."""
    base = {"item_id": item.item_id, "output_index": item.output_index}
    shape = SHAPES.get(item.ref.kind) if item.ref is not None else None
    if shape is not None:
        if status == "completed":
            item.pending = True  # until the gateway has run it
            return shape.closed(item)
        item.done_item = {**shape.added(item), "status": status}
        ended: Event = {"type": "response.output_item.done", "output_index": item.output_index}
        return [{**ended, "item": item.done_item}]
    if item.kind == "mcp_approval_request":
        item.done_item = call_item(item, status)
        return []
    if item.kind == "mcp_call":
        item.done_item = call_item(item, "calling" if status == "completed" else status)
        arguments = item.done_item["arguments"]
        return [{"type": "response.mcp_call_arguments.done", **base, "arguments": arguments}]
    done = call_item(item, status)
    item.done_item = done
    events: list[Event] = []
    if item.kind == "function_call":
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **base,
                "name": done["name"],
                "arguments": done["arguments"],
            }
        )
    elif item.kind == "custom_tool_call":
        streamed = "".join(item.streamed)
        if len(done["input"]) > len(streamed):
            # What the incremental decoder could not stream (a reply shaped
            # otherwise than {"input": "..."}) goes out as one last delta.
            events.append(custom_delta(item, done["input"][len(streamed) :]))
        events.append(
            {"type": "response.custom_tool_call_input.done", **base, "input": done["input"]}
        )
    events.append(
        {"type": "response.output_item.done", "output_index": item.output_index, "item": done}
    )
    return events
