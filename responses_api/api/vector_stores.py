"""The Vector stores API (``/v1/vector_stores``, docs/api/vector-stores.md),
as OpenAI's: stores and their search. Their files and file batches are in
``vector_store_files``.

Another organisation's store answers exactly as a missing one, and so
does an expired one. A store embeds with its organisation's embedding
model (``retrieval.stores.organisation_embedding_model``); with none, it is
searched by keyword only."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from responses_api.api.vector_store_common import (
    as_api_error,
    caller_of,
    domain,
    id_list,
    json_body,
    metadata_field,
    paged,
    query_of,
    string_field,
)
from responses_api.models import VectorStore
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.vector_ingest import files_add, ingest_start
from responses_api.pipeline.vector_search import search_stores
from responses_api.protocol.errors import invalid
from responses_api.retrieval import stores
from responses_api.retrieval.chunking import strategy_parse
from responses_api.retrieval.errors import InvalidParameter, NotFound

MAX_FILES = 2000
CREATE_FIELDS = {
    "name",
    "description",
    "file_ids",
    "chunking_strategy",
    "expires_after",
    "metadata",
}
SEARCH_FIELDS = {"query", "filters", "max_num_results", "ranking_options", "rewrite_query"}


def _create(organisation_id: int, data: dict[str, Any], file_ids: list[str]) -> VectorStore:
    strategy = data.get("chunking_strategy")
    strategy_parse(strategy)
    with transaction.atomic():
        store = stores.vector_store_create(
            organisation_id=organisation_id,
            name=data.get("name") or "",
            metadata=data.get("metadata"),
            expires_after=data.get("expires_after"),
        )
        entries = [{"file_id": f, "chunking_strategy": strategy} for f in file_ids]
        files_add(organisation_id=organisation_id, store_id=store.id, entries=entries)
    ingest_start(organisation_id=organisation_id, store_id=store.id, file_ids=file_ids)
    return store


def _json_of(function: Any, **kwargs: Any) -> dict[str, Any]:
    return stores.vector_store_json(function(**kwargs))


async def create_vector_store(call: Call) -> Reply:
    caller = caller_of(call)
    data = json_body(call, CREATE_FIELDS)
    string_field(data, "name")
    string_field(data, "description", limit=512)
    data["metadata"] = metadata_field(data)
    file_ids = id_list(data, "file_ids", limit=MAX_FILES)
    store = await domain(_create, caller.organisation_id, data, file_ids)
    return Reply(await domain(stores.vector_store_json, store))


def _page(organisation_id: int, query: dict[str, str]) -> dict[str, Any]:
    rows = stores.vector_store_list(organisation_id=organisation_id)
    return paged(rows, query, "id", stores.vector_store_json)


async def list_vector_stores(call: Call) -> Reply:
    return Reply(await domain(_page, caller_of(call).organisation_id, query_of(call)))


async def retrieve_vector_store(call: Call) -> Reply:
    return Reply(
        await domain(
            _json_of,
            stores.vector_store_get,
            organisation_id=caller_of(call).organisation_id,
            store_id=call.params["vector_store_id"],
        )
    )


async def modify_vector_store(call: Call) -> Reply:
    data = json_body(call, {"name", "expires_after", "metadata"})
    string_field(data, "name")
    if "metadata" in data:
        data["metadata"] = metadata_field(data)
    return Reply(
        await domain(
            _json_of,
            stores.vector_store_update,
            organisation_id=caller_of(call).organisation_id,
            store_id=call.params["vector_store_id"],
            changes=data,
        )
    )


async def delete_vector_store(call: Call) -> Reply:
    store_id = call.params["vector_store_id"]
    await domain(
        stores.vector_store_delete,
        organisation_id=caller_of(call).organisation_id,
        store_id=store_id,
    )
    return Reply({"id": store_id, "object": "vector_store.deleted", "deleted": True})


async def search_vector_store(call: Call) -> Reply:
    data = json_body(call, SEARCH_FIELDS)
    if "query" not in data:
        raise invalid("Missing required parameter: 'query'.", param="query")
    rewrite = data.get("rewrite_query", False)
    if not isinstance(rewrite, bool):
        raise invalid("rewrite_query must be a boolean.", param="rewrite_query")
    try:
        page = await search_stores(
            caller_of(call),
            store_ids=[call.params["vector_store_id"]],
            query=data["query"],
            filters=data.get("filters"),
            max_num_results=data.get("max_num_results", 10),
            ranking_options=data.get("ranking_options"),
            rewrite_query=rewrite,
        )
    except (NotFound, InvalidParameter) as error:
        raise as_api_error(error) from None
    return Reply(page)
