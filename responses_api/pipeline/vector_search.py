"""Searching vector stores for a caller: ``POST /v1/vector_stores/{id}/search``
and the ``file_search`` tool, which may search several stores at once.

The query is embedded once per distinct embedding model of the stores
(through :func:`embedding.embed_for_organisation`, so each embedding is one
usage row of the caller's), then every store is searched with that vector
(``retrieval.search``), and the results are merged by score. A store whose
organisation had no embedding model when it was created is searched by
keyword only."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import connections

from responses_api.access.auth import Caller
from responses_api.backends.client import close_clients
from responses_api.models import VectorStore
from responses_api.pipeline.embedding import embed_for_organisation
from responses_api.retrieval.errors import InvalidParameter
from responses_api.retrieval.filters import filter_parse
from responses_api.retrieval.search import options_check, vector_store_search
from responses_api.retrieval.stores import vector_store_get
from responses_api.retrieval.terms import rewrite
from responses_api.runtime import redis_conn

MAX_STORES = 10


def _stores(organisation_id: int, store_ids: list[str]) -> list[VectorStore]:
    return [vector_store_get(organisation_id=organisation_id, store_id=s) for s in store_ids]


def _search_all(
    organisation_id: int,
    stores: list[VectorStore],
    vectors: dict[str, list[float]],
    arguments: dict[str, Any],
) -> list[dict[str, Any]]:
    pages = []
    for store in stores:
        vector = vectors.get(store.embedding_model) if store.dimensions else None
        pages.append(
            vector_store_search(
                organisation_id=organisation_id,
                store_id=store.id,
                embed=_fixed(vector) if vector is not None else None,
                **arguments,
            )
        )
    return pages


def _fixed(vector: list[float]) -> Any:
    def embed(texts: list[str]) -> Sequence[Sequence[float]]:
        return [vector for _ in texts]

    return embed


async def search_stores(
    caller: Caller,
    *,
    store_ids: Sequence[str],
    query: str | list[str],
    filters: dict[str, Any] | None = None,
    max_num_results: int = 10,
    ranking_options: dict[str, Any] | None = None,
    rewrite_query: bool = False,
) -> dict[str, Any]:
    """OpenAI's search results page over ``store_ids`` (the caller's
    organisation's; another's raises the ``NotFound`` of a missing one),
    the results of all stores merged, best score first.

    Raises ``InvalidParameter`` for bad options (before anything is
    embedded), ``NotFound``, and the ``ApiError`` of a failed embedding
    (its usage row written)."""
    text, _, _ = options_check(query, max_num_results, ranking_options)
    if filters is not None:
        filter_parse(filters)
    ids = list(dict.fromkeys(store_ids))
    if not ids or len(ids) > MAX_STORES:
        raise InvalidParameter(
            f"Search from 1 to {MAX_STORES} vector stores at a time.", "vector_store_ids"
        )
    organisation_id = caller.organisation_id
    stores = await sync_to_async(_stores)(organisation_id, ids)
    searched = rewrite(text) if rewrite_query else text
    vectors: dict[str, list[float]] = {}
    for model in dict.fromkeys(s.embedding_model for s in stores if s.dimensions):
        if model and searched.strip():
            embedded = await embed_for_organisation(caller, model=model, texts=[searched])
            vectors[model] = embedded.vectors[0]
    arguments = {
        "query": text,
        "filters": filters,
        "max_num_results": max_num_results,
        "ranking_options": ranking_options,
        "rewrite_query": rewrite_query,
    }
    pages = await sync_to_async(_search_all)(organisation_id, stores, vectors, arguments)
    merged = [result for page in pages for result in page["data"]]
    merged.sort(key=lambda result: -result["score"])
    return {
        "object": "vector_store.search_results.page",
        "search_query": [searched],
        "data": merged[:max_num_results],
        "has_more": False,
        "next_page": None,
    }


def search_stores_blocking(caller: Caller, **arguments: Any) -> dict[str, Any]:
    """:func:`search_stores` for code that is not async (the console): in a
    thread of its own, on an event loop of its own, which closes the
    backend, Redis and database connections it opened."""

    async def run() -> dict[str, Any]:
        try:
            return await search_stores(caller, **arguments)
        finally:
            await close_clients()
            await redis_conn.close_loop_clients()

    def in_thread() -> dict[str, Any]:
        # The database work comes back to this thread (async_to_sync's own).
        try:
            return async_to_sync(run)()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1, thread_name_prefix="vector-store-search") as pool:
        return pool.submit(in_thread).result()
