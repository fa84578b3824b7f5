"""The output items of hosted tools the gateway runs, by tool kind: how a
model's call of such a tool shows as it streams, and what it becomes once
the gateway has run it.

A hosted kind (``pipeline.hosted``) offers the model functions whose
:class:`~responses_api.translate.tools.ToolRef` carries its ``kind``; the
stream translator asks :data:`SHAPES` what a call of that kind looks like:
its item type and id prefix, the events that open it, what its arguments
stream as, and the events that close it. A closed call is *pending*
(``Item.pending``) until the gateway has run it and ended it with
:func:`call_done`. A new kind registers its shape here.

``mcp`` calls keep their own branches in ``translate.items`` and
``translate.events`` (approval requests are items of their own).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from responses_api.translate.citations import Source
from responses_api.translate.file_search_calls import (
    files_added,
    files_closed,
    files_done,
    files_ended,
    files_opened,
)
from responses_api.translate.items import Item, json_or_raw

Event = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallShape:
    """What one kind of hosted call looks like to the client."""

    item_type: str
    prefix: str
    # The item as ``output_item.added`` shows it.
    added: Callable[[Item], dict[str, Any]]
    # The events after ``output_item.added``, and once the arguments are whole.
    opened: Callable[[Item], list[Event]]
    closed: Callable[[Item], list[Event]]
    # The item once run (``call_done``): the arguments and what the run gave.
    done: Callable[[Item, str, dict[str, Any]], dict[str, Any]]
    # The events that end a run, before ``output_item.done``.
    ended: Callable[[Item, str], list[Event]]


def _base(item: Item) -> dict[str, Any]:
    return {"item_id": item.item_id, "output_index": item.output_index}


def web_search_query(item: Item) -> str:
    """The query the model asked for: its ``query`` argument, else its
    arguments as written (a model that ignored the schema)."""
    arguments = json_or_raw("".join(item.text))
    if isinstance(arguments, dict):
        query = arguments.get("query")
        if isinstance(query, str):
            return query
        if isinstance(query, list) and query and all(isinstance(q, str) for q in query):
            return " ".join(query)
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()


def _search_added(item: Item) -> dict[str, Any]:
    return {
        "id": item.item_id,
        "type": "web_search_call",
        "status": "in_progress",
        "action": {"type": "search"},
    }


def _search_opened(item: Item) -> list[Event]:
    return [{"type": "response.web_search_call.in_progress", **_base(item)}]


def _search_closed(item: Item) -> list[Event]:
    item.done_item = {
        **_search_added(item),
        "status": "searching",
        "action": {"type": "search", "query": web_search_query(item)},
    }
    return [{"type": "response.web_search_call.searching", **_base(item)}]


def _search_done(item: Item, status: str, extra: dict[str, Any]) -> dict[str, Any]:
    assert item.done_item is not None
    action = {**item.done_item["action"]}
    if "sources" in extra:
        action["sources"] = extra["sources"]
    return {**item.done_item, "status": status, "action": action}


def _search_ended(item: Item, status: str) -> list[Event]:
    if status != "completed":
        return []  # OpenAI's stream has no failed event: the item's status says it
    return [{"type": "response.web_search_call.completed", **_base(item)}]


def page_arguments(item: Item) -> tuple[str, str]:
    """The ``url`` and ``pattern`` an ``open_page`` or ``find_in_page``
    call asked for ("" where it gave none)."""
    arguments = json_or_raw("".join(item.text))
    if not isinstance(arguments, dict):
        return "", ""
    url, pattern = arguments.get("url"), arguments.get("pattern")
    return (
        url.strip() if isinstance(url, str) else "",
        pattern if isinstance(pattern, str) else "",
    )


def _page_added(item: Item) -> dict[str, Any]:
    assert item.ref is not None
    return {**_search_added(item), "action": {"type": item.ref.kind}}


def _page_closed(item: Item) -> list[Event]:
    assert item.ref is not None
    url, pattern = page_arguments(item)
    action: dict[str, Any] = {"type": item.ref.kind, "url": url}
    if item.ref.kind == "find_in_page":
        action["pattern"] = pattern
    item.done_item = {**_search_added(item), "status": "searching", "action": action}
    return [{"type": "response.web_search_call.searching", **_base(item)}]


def _page_done(item: Item, status: str, extra: dict[str, Any]) -> dict[str, Any]:
    assert item.done_item is not None
    return {**item.done_item, "status": status}


_SEARCH = CallShape(
    "web_search_call",
    "ws",
    _search_added,
    _search_opened,
    _search_closed,
    _search_done,
    _search_ended,
)
# ``open_page`` and ``find_in_page``: the same item and events as a search,
# with their own action.
_PAGE = CallShape(
    "web_search_call", "ws", _page_added, _search_opened, _page_closed, _page_done, _search_ended
)
SHAPES: dict[str, CallShape] = {
    "web_search": _SEARCH,
    "open_page": _PAGE,
    "find_in_page": _PAGE,
    "file_search": CallShape(
        "file_search_call",
        "fs",
        files_added,
        files_opened,
        files_closed,
        files_done,
        files_ended,
    ),
}
WEB_KINDS = frozenset({"web_search", "open_page", "find_in_page"})
# An action's type, by the kind of function that makes it.
_ACTION_KINDS = {"search": "web_search", "open_page": "open_page", "find_in_page": "find_in_page"}


def call_done(item: Item, *, failed: bool, extra: dict[str, Any] | None = None) -> list[Event]:
    """A pending hosted call has run: the events that end it."""
    assert item.ref is not None
    shape = SHAPES[item.ref.kind]
    status = "failed" if failed else "completed"
    item.done_item = shape.done(item, status, extra or {})
    item.pending = False
    return [
        *shape.ended(item, status),
        {
            "type": "response.output_item.done",
            "output_index": item.output_index,
            "item": item.done_item,
        },
    ]


def pending_calls(items: Sequence[Item]) -> list[Item]:
    """The hosted calls (not MCP's) the last backend call made, not yet run."""
    return [item for item in items if item.pending]


def search_results_text(query: str, sources: Sequence[Source], first: int) -> str:
    """What the model reads of a search: the results numbered from ``first``
    (one numbering per response), and how to cite them."""
    if not sources:
        return f'The web search for "{query}" found nothing.'
    lines = [
        f'Web search results for "{query}". Cite a source you use by its number in '
        "brackets, like [1], right after what it supports.",
    ]
    for number, source in enumerate(sources, start=first):
        lines.append(f"\n[{number}] {source.title}\nURL: {source.url}")
        if source.snippet:
            lines.append(source.snippet)
    return "\n".join(lines)


def search_failed_text(query: str, error: str) -> str:
    return f'The web search for "{query}" failed: {error} Answer without it, and say so.'


def searched_again(item: dict[str, Any], index: int) -> tuple[str, str, str]:
    """A ``web_search_call`` of an earlier response as the model reads it
    again: a call of the search (its id, its arguments) and what it found,
    as far as the item tells (the sources, when it carried them)."""
    action = item.get("action")
    action = action if isinstance(action, dict) else {}
    query = action.get("query")
    query = query if isinstance(query, str) else ""
    sources = action.get("sources")
    urls = [
        s["url"]
        for s in (sources if isinstance(sources, list) else ())
        if isinstance(s, dict) and isinstance(s.get("url"), str)
    ]
    call_id = item.get("id") if isinstance(item.get("id"), str) else f"call_ws_{index}"
    if action.get("type") in ("open_page", "find_in_page"):
        return str(call_id), *_opened_again(item, action)
    if item.get("status") == "failed":
        result = f'The web search for "{query}" failed.'
    elif urls:
        result = f'The web search for "{query}" found:\n' + "\n".join(urls)
    else:
        result = f'The web search for "{query}" ran; its results are no longer available.'
    return str(call_id), orjson.dumps({"query": query}).decode(), result


def replayed_kind(item: dict[str, Any]) -> str:
    """The hosted kind whose function a ``web_search_call`` of an earlier
    response was a call of (by its action's type; a search by default)."""
    action = item.get("action")
    kind = action.get("type") if isinstance(action, dict) else None
    return _ACTION_KINDS.get(kind if isinstance(kind, str) else "", "web_search")


def _opened_again(item: dict[str, Any], action: dict[str, Any]) -> tuple[str, str]:
    """An ``open_page`` or ``find_in_page`` of an earlier response: its
    arguments, and that what it read is gone (the item never holds it)."""
    given = action.get("url")
    url = given if isinstance(given, str) else ""
    arguments: dict[str, str] = {"url": url}
    if action.get("type") == "find_in_page":
        pattern = action.get("pattern")
        arguments["pattern"] = pattern if isinstance(pattern, str) else ""
    if item.get("status") == "failed":
        result = f"Reading {url} failed."
    else:
        result = f"{url} was read; open it again to read it now."
    return orjson.dumps(arguments).decode(), result
