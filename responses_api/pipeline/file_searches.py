"""File search, the hosted kind ``file_search`` (docs/api/file-search.md):
the model is offered one function, ``file_search({"query": …})``; each call
becomes a ``file_search_call`` item and searches the request's vector
stores (``vector_store_ids``, the caller's organisation's only), with the
tool's ``filters``, ``max_num_results`` and ``ranking_options``. The
results go back to the model numbered for the whole response, capped
(``translate.file_search_calls``), and the answers written after them get
``file_citation`` annotations for the files they cite
(``translate.citations.file_citations``). A search that fails is told to
the model: the response goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from responses_api.access.auth import Caller
from responses_api.pipeline.hosted import Searching
from responses_api.pipeline.vector_search import search_stores
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError, invalid
from responses_api.protocol.tools import HostedTool
from responses_api.retrieval.errors import InvalidParameter, NotFound
from responses_api.retrieval.filters import filter_parse
from responses_api.retrieval.search import options_check
from responses_api.translate.citations import FileSource, file_annotator
from responses_api.translate.file_search_calls import (
    file_results_text,
    file_search_failed_text,
    file_search_queries,
    shown_results,
)
from responses_api.translate.hosted_calls import call_done, pending_calls
from responses_api.translate.items import Item
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.tools import HostedFunction, ToolRef

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

RESULTS_INCLUDE = "file_search_call.results"
FILE_SEARCH_TYPES = frozenset({"file_search"})
MAX_STORES = 10
MAX_QUERIES = 5
DESCRIPTION = (
    "Search the user's files. Returns numbered passages (file name, text); cite a passage "
    "you use by its number in brackets, like [1]."
)
PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What to search the files for."}},
    "required": ["query"],
}


@dataclass(frozen=True, slots=True)
class FileSearchSettings:
    """What the request's ``file_search`` tool asks of every search."""

    store_ids: tuple[str, ...]
    max_num_results: int = 10
    filters: dict[str, Any] | None = None
    ranking_options: dict[str, Any] | None = None


@dataclass(slots=True)
class FileSearch(Searching):
    """The request's ``file_search`` tool, over the organisation's stores."""

    caller: Caller
    wanted: FileSearchSettings
    show_results: bool
    types: frozenset[str] = FILE_SEARCH_TYPES
    sources: list[FileSource] = field(default_factory=list)
    told: dict[str, str] = field(default_factory=dict)

    def functions(self) -> list[HostedFunction]:
        ref = ToolRef(kind="file_search", name="file_search", item=("file_search_call", "fs"))
        return [HostedFunction(ref, DESCRIPTION, PARAMETERS)]

    def opening(self, translator: StreamTranslator) -> list[dict[str, Any]]:
        return []

    def waiting(self, translator: StreamTranslator) -> list[Item]:
        return [
            item
            for item in pending_calls(translator.items)
            if item.ref is not None and item.ref.kind == "file_search"
        ]

    def refuse(self, item: Item, error: str) -> list[dict[str, Any]]:
        self.told[item.item_id] = file_search_failed_text(file_search_queries(item), error)
        return call_done(item, failed=True)

    async def _run(
        self, translator: StreamTranslator, item: Item, deadline: float
    ) -> list[dict[str, Any]]:
        queries = [q.strip() for q in file_search_queries(item) if q.strip()][:MAX_QUERIES]
        left = deadline - time.monotonic()
        if not queries:
            return self.refuse(item, "The search had no query.")
        if left <= 0:
            return self.refuse(item, "The response's time for tool calls is over.")
        try:
            found = await asyncio.wait_for(self._search(queries), timeout=left)
        except TimeoutError:
            return self.refuse(item, "The search took longer than the response allows.")
        except (ApiError, InvalidParameter, NotFound) as error:
            return self.refuse(item, error.message)
        except Exception:  # a fault of the search must fail its call, not the response
            log.exception("file search failed")
            return self.refuse(item, "The search failed on the server.")
        first = len(self.sources) + 1
        self.sources.extend(found)
        self.told[item.item_id] = file_results_text(queries, found, first)
        translator.closing.annotate = file_annotator(self.sources)
        extra = {"results": shown_results(found)} if self.show_results else {}
        return call_done(item, failed=False, extra=extra)

    async def _search(self, queries: list[str]) -> list[FileSource]:
        """The best results of all the queries, each chunk once, best first."""
        best: dict[tuple[str, str], FileSource] = {}
        for query in queries:
            page = await search_stores(
                self.caller,
                store_ids=list(self.wanted.store_ids),
                query=query,
                filters=self.wanted.filters,
                max_num_results=self.wanted.max_num_results,
                ranking_options=self.wanted.ranking_options,
            )
            for result in page.get("data") or ():
                text = "\n".join(
                    part.get("text", "") for part in result.get("content") or () if part
                )
                source = FileSource(
                    file_id=str(result.get("file_id") or ""),
                    filename=str(result.get("filename") or ""),
                    text=text,
                    score=float(result.get("score") or 0.0),
                    attributes=dict(result.get("attributes") or {}),
                )
                key = (source.file_id, text)
                if key not in best or best[key].score < source.score:
                    best[key] = source
        ranked = sorted(best.values(), key=lambda s: -s.score)
        return ranked[: self.wanted.max_num_results]


async def file_search_kind(caller: Caller, request: CreateResponse) -> FileSearch | None:
    """The request's file search, when it offers the tool with stores (else
    None: the tool is dropped with a notice). A store the organisation does
    not have is refused (400), another organisation's alike."""
    wanted = [
        (index, tool.model_dump())
        for index, tool in enumerate(request.tools or ())
        if isinstance(tool, HostedTool) and tool.type in FILE_SEARCH_TYPES
    ]
    if not wanted:
        return None
    index, tool = wanted[0]
    checked = file_search_settings(tool, index)
    if not checked.store_ids:
        return None
    await sync_to_async(_stores_check)(caller.organisation_id, checked.store_ids, index)
    include = request.include or ()
    return FileSearch(caller, checked, RESULTS_INCLUDE in include)


def file_search_settings(tool: dict[str, Any], index: int) -> FileSearchSettings:
    """The tool's settings, checked; an ``ApiError`` naming what is wrong."""
    param = f"tools[{index}]"
    ids = tool.get("vector_store_ids")
    if ids is None:
        ids = []
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise invalid(
            "vector_store_ids must be a list of vector store ids.",
            param=f"{param}.vector_store_ids",
        )
    if len(ids) > MAX_STORES:
        raise invalid(
            f"vector_store_ids may name {MAX_STORES} vector stores at most.",
            param=f"{param}.vector_store_ids",
        )
    count = tool.get("max_num_results")
    count = 10 if count is None else count
    ranking = tool.get("ranking_options")
    if isinstance(ranking, dict):
        # Weights of the fusion are not taken: the fusion is reciprocal rank's.
        ranking = {k: v for k, v in ranking.items() if k != "hybrid_search" and v is not None}
    filters = tool.get("filters")
    try:
        options_check("query", count, ranking)
        if filters is not None:
            filter_parse(filters, "filters")
    except InvalidParameter as error:
        raise invalid(error.message, param=f"{param}.{error.param}") from None
    return FileSearchSettings(tuple(dict.fromkeys(ids)), count, filters, ranking or None)


def _stores_check(organisation_id: int, store_ids: tuple[str, ...], index: int) -> None:
    from responses_api.retrieval.stores import vector_store_get

    for store_id in store_ids:
        try:
            vector_store_get(organisation_id=organisation_id, store_id=store_id)
        except NotFound as missing:
            raise invalid(missing.message, param=f"tools[{index}].vector_store_ids") from None
