"""``file_search_call`` items (docs/api/file-search.md): how a model's call
of ``file_search`` shows as it streams, what it becomes once run, what the
model reads of its results, and how an earlier response's call is read
again. Registered in ``translate.hosted_calls.SHAPES``.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from responses_api.translate.citations import FileSource
from responses_api.translate.items import Item, json_or_raw

Event = dict[str, Any]

# What the model reads of one result, and of one search, at most.
RESULT_CHARS = 2_000
SEARCH_CHARS = 16_000


def _base(item: Item) -> dict[str, Any]:
    return {"item_id": item.item_id, "output_index": item.output_index}


def file_search_queries(item: Item) -> list[str]:
    """The queries the model asked for: its ``query`` (or ``queries``)
    argument, else its arguments as written (a model that ignored the
    schema)."""
    arguments = json_or_raw("".join(item.text))
    if isinstance(arguments, dict):
        for key in ("queries", "query"):
            value = arguments.get(key)
            if isinstance(value, str):
                return [value]
            if isinstance(value, list) and value and all(isinstance(q, str) for q in value):
                return list(value)
    return [arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()]


def files_added(item: Item) -> dict[str, Any]:
    return {
        "id": item.item_id,
        "type": "file_search_call",
        "status": "in_progress",
        "queries": [],
        "results": None,
    }


def files_opened(item: Item) -> list[Event]:
    return [{"type": "response.file_search_call.in_progress", **_base(item)}]


def files_closed(item: Item) -> list[Event]:
    item.done_item = {
        **files_added(item),
        "status": "searching",
        "queries": file_search_queries(item),
    }
    return [{"type": "response.file_search_call.searching", **_base(item)}]


def files_done(item: Item, status: str, extra: dict[str, Any]) -> dict[str, Any]:
    assert item.done_item is not None
    return {**item.done_item, "status": status, "results": extra.get("results")}


def files_ended(item: Item, status: str) -> list[Event]:
    if status != "completed":
        return []  # OpenAI's stream has no failed event: the item's status says it
    return [{"type": "response.file_search_call.completed", **_base(item)}]


def shown_results(found: Sequence[FileSource]) -> list[dict[str, Any]]:
    """The item's ``results`` (with ``include: ["file_search_call.results"]``)."""
    return [
        {
            "file_id": f.file_id,
            "filename": f.filename,
            "score": f.score,
            "attributes": f.attributes,
            "text": f.text,
        }
        for f in found
    ]


def file_results_text(queries: Sequence[str], found: Sequence[FileSource], first: int) -> str:
    """What the model reads of a search: the results numbered from ``first``
    (one numbering per response), each capped, and how to cite them."""
    asked = ", ".join(f'"{q}"' for q in queries)
    if not found:
        return f"The file search for {asked} found nothing."
    lines = [
        f"File search results for {asked}. Cite a result you use by its number in "
        "brackets, like [1], right after what it supports.",
    ]
    used = len(lines[0])
    for number, source in enumerate(found, start=first):
        text = source.text[:RESULT_CHARS]
        block = f"\n[{number}] {source.filename} (file {source.file_id})\n{text}"
        if used + len(block) > SEARCH_CHARS:
            lines.append(f"\n({len(found) - number + first} more results left out.)")
            break
        lines.append(block)
        used += len(block)
    return "\n".join(lines)


def file_search_failed_text(queries: Sequence[str], error: str) -> str:
    asked = ", ".join(f'"{q}"' for q in queries)
    return f"The file search for {asked} failed: {error} Answer without it, and say so."


def files_searched_again(item: dict[str, Any], index: int) -> tuple[str, str, str]:
    """A ``file_search_call`` of an earlier response as the model reads it
    again: a call of the search (its id, its arguments) and what it found,
    as far as the item tells (its results, when it carried them)."""
    queries = item.get("queries")
    queries = [q for q in queries if isinstance(q, str)] if isinstance(queries, list) else []
    call_id = item.get("id") if isinstance(item.get("id"), str) else f"call_fs_{index}"
    results = item.get("results")
    found = [
        FileSource(
            file_id=str(r.get("file_id") or ""),
            filename=str(r.get("filename") or ""),
            text=str(r.get("text") or ""),
        )
        for r in (results if isinstance(results, list) else ())
        if isinstance(r, dict)
    ]
    arguments = orjson.dumps(
        {"queries": queries} if len(queries) > 1 else {"query": " ".join(queries)}
    )
    asked = ", ".join(f'"{q}"' for q in queries)
    if item.get("status") == "failed":
        result = f"The file search for {asked} failed."
    elif found:
        result = file_results_text(queries, found, 1)
    else:
        result = f"The file search for {asked} ran; its results are no longer available."
    return str(call_id), arguments.decode(), result
