"""The files of a vector store and its file batches
(``/v1/vector_stores/{id}/files``, ``/file_batches``), as OpenAI's.

Adding a file answers at once with it ``in_progress``; it is read,
chunked, embedded and indexed off the request (``pipeline.vector_ingest``).
A file id the organisation's Files API does not have is a 404 naming
``file_id``, the same for another organisation's file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from django.db import transaction

from responses_api.api.vector_store_common import (
    caller_of,
    domain,
    id_list,
    json_body,
    paged,
    query_of,
)
from responses_api.models import VectorStoreFile
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.vector_ingest import files_add, ingest_start
from responses_api.protocol.errors import invalid
from responses_api.retrieval import batches, stores
from responses_api.retrieval.chunking import strategy_parse
from responses_api.retrieval.stores import attributes_check

MAX_BATCH = 2000
# Chunks read and written at a time by the content page.
CONTENT_BATCH = 100
STATUSES = tuple(VectorStoreFile.Status.values)


def _ids(call: Call) -> dict[str, Any]:
    return {
        "organisation_id": caller_of(call).organisation_id,
        "store_id": call.params["vector_store_id"],
    }


def _add(organisation_id: int, store_id: str, entries: list[dict[str, Any]]) -> VectorStoreFile:
    [added] = files_add(organisation_id=organisation_id, store_id=store_id, entries=entries)
    ingest_start(organisation_id=organisation_id, store_id=store_id, file_ids=[added.file_id])
    return added


async def create_vector_store_file(call: Call) -> Reply:
    data = json_body(call, {"file_id", "attributes", "chunking_strategy"})
    file_id = data.get("file_id")
    if not isinstance(file_id, str) or not file_id:
        raise invalid("Missing required parameter: 'file_id'.", param="file_id")
    entry = {
        "file_id": file_id,
        "attributes": data.get("attributes"),
        "chunking_strategy": data.get("chunking_strategy"),
    }
    added = await domain(_add, entries=[entry], **_ids(call))
    return Reply(stores.vector_store_file_json(added))


def _status_filter(query: dict[str, str]) -> str | None:
    status = query.get("filter") or None
    if status is not None and status not in STATUSES:
        raise invalid("filter must be one of " + ", ".join(STATUSES) + ".", param="filter")
    return status


def _files_page(organisation_id: int, store_id: str, query: dict[str, str]) -> dict[str, Any]:
    rows = stores.vector_store_file_list(
        organisation_id=organisation_id, store_id=store_id, status=_status_filter(query)
    )
    return paged(rows, query, "file_id", stores.vector_store_file_json)


async def list_vector_store_files(call: Call) -> Reply:
    query = query_of(call)
    _status_filter(query)
    return Reply(await domain(_files_page, query=query, **_ids(call)))


def _file_json(function: Any, **kwargs: Any) -> dict[str, Any]:
    return stores.vector_store_file_json(function(**kwargs))


async def retrieve_vector_store_file(call: Call) -> Reply:
    return Reply(
        await domain(
            _file_json,
            stores.vector_store_file_get,
            file_id=call.params["file_id"],
            **_ids(call),
        )
    )


async def update_vector_store_file(call: Call) -> Reply:
    data = json_body(call, {"attributes"})
    if "attributes" not in data:
        raise invalid("Missing required parameter: 'attributes'.", param="attributes")
    return Reply(
        await domain(
            _file_json,
            stores.vector_store_file_update,
            file_id=call.params["file_id"],
            attributes=data["attributes"],
            **_ids(call),
        )
    )


async def delete_vector_store_file(call: Call) -> Reply:
    file_id = call.params["file_id"]
    await domain(stores.vector_store_file_delete, file_id=file_id, **_ids(call))
    return Reply({"id": file_id, "object": "vector_store.file.deleted", "deleted": True})


async def vector_store_file_content(call: Call) -> Reply:
    """The file's chunks as OpenAI's content page, written as they are read,
    :data:`CONTENT_BATCH` chunks at a time: a large file's text is never
    held whole. Its length is not known before, so the page goes out in
    chunked encoding; a failure part way leaves JSON that does not parse."""
    file_pk = await domain(
        stores.vector_store_file_pk, file_id=call.params["file_id"], **_ids(call)
    )
    first = await domain(
        stores.vector_store_file_texts, file_pk=file_pk, after=-1, limit=CONTENT_BATCH
    )
    return Reply(
        {},
        stream=_content_page(file_pk, first),
        length=None,
        media_type=b"application/json",
        attachment=False,
    )


async def _content_page(file_pk: int, first: list[tuple[int, str]]) -> AsyncIterator[bytes]:
    yield b'{"object":"vector_store.file_content.page","data":['
    texts, separator = first, b""
    while texts:
        parts = [orjson.dumps({"type": "text", "text": text}) for _, text in texts]
        yield separator + b",".join(parts)
        separator = b","
        texts = await domain(
            stores.vector_store_file_texts,
            file_pk=file_pk,
            after=texts[-1][0],
            limit=CONTENT_BATCH,
        )
    yield b'],"has_more":false,"next_page":null}'


# --- file batches -----------------------------------------------------------------


def _batch_entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    if ("file_ids" in data) == ("files" in data):
        raise invalid("Give either file_ids or files.", param="file_ids")
    if "file_ids" in data:
        file_ids = id_list(data, "file_ids", limit=MAX_BATCH)
        if not file_ids:
            raise invalid("file_ids must not be empty.", param="file_ids")
        attributes = data.get("attributes")
        strategy = data.get("chunking_strategy")
        return [
            {"file_id": f, "attributes": attributes, "chunking_strategy": strategy}
            for f in file_ids
        ]
    files = data["files"]
    if not isinstance(files, list) or not 1 <= len(files) <= MAX_BATCH:
        raise invalid(f"files must be a list of 1 to {MAX_BATCH} objects.", param="files")
    entries = []
    for index, entry in enumerate(files):
        param = f"files[{index}]"
        if not isinstance(entry, dict) or not set(entry) <= {
            "file_id",
            "attributes",
            "chunking_strategy",
        }:
            raise invalid("Each file takes file_id, attributes, chunking_strategy.", param=param)
        if not isinstance(entry.get("file_id"), str) or not entry["file_id"]:
            raise invalid("Missing required parameter: 'file_id'.", param=f"{param}.file_id")
        entries.append(entry)
    return list({entry["file_id"]: entry for entry in entries}.values())


def _batch_create(
    organisation_id: int, store_id: str, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    for entry in entries:
        strategy_parse(entry.get("chunking_strategy"))
        attributes_check(entry.get("attributes"))
    with transaction.atomic():
        batch = batches.batch_create(organisation_id=organisation_id, store_id=store_id)
        files_add(
            organisation_id=organisation_id, store_id=store_id, entries=entries, batch_id=batch.id
        )
    file_ids = [entry["file_id"] for entry in entries]
    ingest_start(organisation_id=organisation_id, store_id=store_id, file_ids=file_ids)
    return batches.batch_json(batch)


async def create_file_batch(call: Call) -> Reply:
    data = json_body(call, {"file_ids", "files", "attributes", "chunking_strategy"})
    entries = _batch_entries(data)
    return Reply(await domain(_batch_create, entries=entries, **_ids(call)))


def _batch_json(function: Any, **kwargs: Any) -> dict[str, Any]:
    return batches.batch_json(function(**kwargs))


async def retrieve_file_batch(call: Call) -> Reply:
    return Reply(
        await domain(_batch_json, batches.batch_get, batch_id=call.params["batch_id"], **_ids(call))
    )


async def cancel_file_batch(call: Call) -> Reply:
    return Reply(
        await domain(
            _batch_json, batches.batch_cancel, batch_id=call.params["batch_id"], **_ids(call)
        )
    )


def _batch_page(
    organisation_id: int, store_id: str, batch_id: str, query: dict[str, str]
) -> dict[str, Any]:
    batch = batches.batch_get(organisation_id=organisation_id, store_id=store_id, batch_id=batch_id)
    rows = batches.batch_files(batch)
    status = _status_filter(query)
    if status:
        rows = rows.filter(status=status)
    return paged(rows, query, "file_id", stores.vector_store_file_json)


async def list_file_batch_files(call: Call) -> Reply:
    query = query_of(call)
    _status_filter(query)
    return Reply(
        await domain(_batch_page, batch_id=call.params["batch_id"], query=query, **_ids(call))
    )
