"""Searching an organisation's vector stores for a request of its own
(``file_search``): the query embedded with the organisation's embedding
model, each store searched (``retrieval.search``), the results merged."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async

from responses_api.access.auth import Caller
from responses_api.catalogue.catalog import get_catalog
from responses_api.pipeline.embedding import embed_for_organisation
from responses_api.retrieval.search import options_check, vector_store_search


async def search_stores(
    caller: Caller,
    *,
    store_ids: list[str],
    query: str | list[str],
    filters: dict[str, Any] | None = None,
    max_num_results: int = 10,
    ranking_options: dict[str, Any] | None = None,
    rewrite_query: bool = False,
) -> dict[str, Any]:
    """OpenAI's search page over all of ``store_ids``, best first."""
    text, _, _ = options_check(query, max_num_results, ranking_options)
    catalog = await get_catalog(caller.organisation_id)
    model = next((m for m in catalog.models if m.kind == "embed"), None)
    vectors = None
    if model is not None:
        embedded = await embed_for_organisation(caller, model=model.public_id, texts=[text])
        vectors = embedded.vectors

    def search(store_id: str) -> dict[str, Any]:
        return vector_store_search(
            organisation_id=caller.organisation_id,
            store_id=store_id,
            query=text,
            embed=(lambda _: vectors) if vectors is not None else None,
            filters=filters,
            max_num_results=max_num_results,
            ranking_options=ranking_options,
            rewrite_query=rewrite_query,
        )

    pages = [await sync_to_async(search)(store_id) for store_id in store_ids]
    data = sorted((r for p in pages for r in p["data"]), key=lambda r: -r["score"])
    return {
        "object": "vector_store.search_results.page",
        "search_query": pages[0]["search_query"] if pages else [text],
        "data": data[:max_num_results],
        "has_more": False,
        "next_page": None,
    }
