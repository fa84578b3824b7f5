"""A strict reader of Responses streams, for tests.

Stricter than the SDK's own stream state: items never interleave (an item's
``output_item.added`` only after the previous item's ``output_item.done``),
every event of an item names the open item, deltas add up to their ``.done``
text, sequence numbers count up from 0, and the terminal event's output is
exactly the items that were done, in order.
"""

from __future__ import annotations

from typing import Any

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
DELTAS = {
    "response.output_text.delta": ("response.output_text.done", "text"),
    "response.reasoning_text.delta": ("response.reasoning_text.done", "text"),
    "response.function_call_arguments.delta": (
        "response.function_call_arguments.done",
        "arguments",
    ),
    "response.custom_tool_call_input.delta": ("response.custom_tool_call_input.done", "input"),
}


def check_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Check ``events`` (dicts, as sent) and return the terminal response."""
    numbers = [e.get("sequence_number") for e in events]
    assert numbers == list(range(len(events))), f"sequence numbers {numbers}"
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created", kinds[:2]
    assert kinds[-1] in TERMINAL, kinds[-1]
    assert sum(kind in TERMINAL for kind in kinds) == 1
    open_item: dict[str, Any] | None = None
    part_open = False
    done_items: list[dict[str, Any]] = []
    text: dict[str, list[str]] = {}
    for event in events[1:-1]:
        kind = event["type"]
        if kind == "response.in_progress":
            continue  # a keep-alive may come at any time
        if kind == "response.output_item.added":
            assert open_item is None, f"{event['item']['id']} added while {open_item} is open"
            assert event["output_index"] == len(done_items), event
            open_item = event["item"]
            text = {}
            part_open = False
            continue
        assert open_item is not None, f"{kind} outside an item"
        assert event["output_index"] == len(done_items), event
        if kind == "response.output_item.done":
            item = event["item"]
            assert item["id"] == open_item["id"] and item["type"] == open_item["type"]
            done_items.append(item)
            open_item = None
            continue
        assert event["item_id"] == open_item["id"], event
        if kind == "response.content_part.added":
            assert not part_open
            part_open = True
        elif kind == "response.content_part.done":
            assert part_open
            part_open = False
        elif open_item["type"] in {"message", "reasoning"}:
            assert part_open, f"{kind} outside its content part"
        if kind in DELTAS:
            done_kind, _ = DELTAS[kind]
            text.setdefault(done_kind, []).append(event["delta"])
        elif kind in {d for d, _ in DELTAS.values()}:
            field = next(f for d, f in DELTAS.values() if d == kind)
            assert "".join(text.get(kind, [])) == event[field], (kind, text.get(kind), event)
    assert open_item is None, f"{open_item['id']} never done"
    response = events[-1]["response"]
    assert response["output"] == done_items
    return response
