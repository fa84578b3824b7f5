"""Vector stores: the organisation's stores, a store's files and their
statuses, and a search box that runs a search as the API would (its
embedding is a usage row of the organisation's, with no key)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from responses_api.access.auth import organisation_caller
from responses_api.pipeline.vector_search import search_stores_blocking
from responses_api.protocol.errors import ApiError
from responses_api.retrieval.errors import InvalidParameter, NotFound
from responses_api.retrieval.stores import (
    vector_store_file_list,
    vector_store_get,
    vector_store_json,
    vector_store_list,
)

# The newest stores and files shown; the API lists them all.
SHOWN = 500


def _shown(store: Any) -> dict[str, Any]:
    return {
        **vector_store_json(store),
        "embedding_model": store.embedding_model,
        "created": store.created_at,
    }


def store_list(request: HttpRequest, membership) -> HttpResponse:
    stores = list(vector_store_list(organisation_id=membership.organisation_id)[: SHOWN + 1])
    context = {
        "stores": [_shown(store) for store in stores[:SHOWN]],
        "more": len(stores) > SHOWN,
        "shown": SHOWN,
    }
    return render(request, "console/vector_stores.html", context)


def store_detail(request: HttpRequest, membership, store_id: str) -> HttpResponse:
    organisation_id = membership.organisation_id
    try:
        store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    except NotFound:  # another organisation's store too
        raise Http404("No such vector store.") from None
    files = vector_store_file_list(organisation_id=organisation_id, store_id=store.id)
    query = request.GET.get("q", "").strip()
    results: dict[str, Any] | None = None
    error = ""
    if query:
        try:
            results = search_stores_blocking(
                organisation_caller(organisation_id), store_ids=[store.id], query=query
            )
        except (InvalidParameter, NotFound, ApiError) as refused:
            error = refused.message
    context = {
        "store": _shown(store),
        "files": list(files[:SHOWN]),
        "query": query,
        "results": results,
        "error": error,
    }
    return render(request, "console/vector_store.html", context)
