"""The Vector stores API's operations (``edge/routes.Operation``'s fields,
by path and method) and the schemas the OpenAPI document gives them."""

from __future__ import annotations

from typing import Any

from responses_api.api import vector_store_files as files
from responses_api.api import vector_stores as stores

_TENANCY = "Another organisation's store (or file), and an expired store, answer as an unknown id."
_ERRORS = (400, 401, 404, 415)
_READ_ERRORS = (400, 401, 404)


def _op(
    handler: Any, operation_id: str, summary: str, schema: str, *, request: str | None = None
) -> dict[str, Any]:
    return {
        "handler": handler,
        "operation_id": operation_id,
        "summary": summary,
        "description": _TENANCY,
        "request": request,
        "answer": f"The {schema}.",
        "content": {"application/json": schema},
        "errors": _ERRORS if request else _READ_ERRORS,
    }


VECTOR_STORE_OPERATIONS: dict[str, dict[str, dict[str, Any]]] = {
    "/vector_stores": {
        "POST": _op(
            stores.create_vector_store,
            "createVectorStore",
            "Create a vector store (name, file_ids, chunking_strategy, expires_after, metadata)",
            "VectorStore",
            request="VectorStoreCreate",
        ),
        "GET": _op(
            stores.list_vector_stores,
            "listVectorStores",
            "The organisation's vector stores (limit, order, after, before)",
            "VectorStoreList",
        ),
    },
    "/vector_stores/{vector_store_id}": {
        "GET": _op(
            stores.retrieve_vector_store, "getVectorStore", "Retrieve a vector store", "VectorStore"
        ),
        "POST": _op(
            stores.modify_vector_store,
            "modifyVectorStore",
            "Modify a vector store (name, expires_after, metadata)",
            "VectorStore",
            request="VectorStoreModify",
        ),
        "DELETE": _op(
            stores.delete_vector_store,
            "deleteVectorStore",
            "Delete a vector store, its files' entries, chunks and vectors",
            "Deleted",
        ),
    },
    "/vector_stores/{vector_store_id}/search": {
        "POST": _op(
            stores.search_vector_store,
            "searchVectorStore",
            "Search a vector store (query, filters, ranking_options, max_num_results, "
            "rewrite_query)",
            "VectorStoreSearchPage",
            request="VectorStoreSearch",
        ),
    },
    "/vector_stores/{vector_store_id}/files": {
        "POST": _op(
            files.create_vector_store_file,
            "createVectorStoreFile",
            "Add a file of the Files API (file_id, attributes, chunking_strategy)",
            "VectorStoreFile",
            request="VectorStoreFileCreate",
        ),
        "GET": _op(
            files.list_vector_store_files,
            "listVectorStoreFiles",
            "A store's files (filter by status, limit, order, after, before)",
            "VectorStoreFileList",
        ),
    },
    "/vector_stores/{vector_store_id}/files/{file_id}": {
        "GET": _op(
            files.retrieve_vector_store_file,
            "getVectorStoreFile",
            "Retrieve a store's file",
            "VectorStoreFile",
        ),
        "POST": _op(
            files.update_vector_store_file,
            "updateVectorStoreFileAttributes",
            "Replace a store's file's attributes",
            "VectorStoreFile",
            request="VectorStoreFileUpdate",
        ),
        "DELETE": _op(
            files.delete_vector_store_file,
            "deleteVectorStoreFile",
            "Remove a file from the store (the Files API's file stays)",
            "Deleted",
        ),
    },
    "/vector_stores/{vector_store_id}/files/{file_id}/content": {
        "GET": _op(
            files.vector_store_file_content,
            "retrieveVectorStoreFileContent",
            "A store's file's parsed text, chunk by chunk",
            "VectorStoreFileContent",
        ),
    },
    "/vector_stores/{vector_store_id}/file_batches": {
        "POST": _op(
            files.create_file_batch,
            "createVectorStoreFileBatch",
            "Add files together (file_ids, or files with their own attributes)",
            "VectorStoreFileBatch",
            request="VectorStoreFileBatchCreate",
        ),
    },
    "/vector_stores/{vector_store_id}/file_batches/{batch_id}": {
        "GET": _op(
            files.retrieve_file_batch,
            "getVectorStoreFileBatch",
            "Retrieve a file batch",
            "VectorStoreFileBatch",
        ),
    },
    "/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel": {
        "POST": _op(
            files.cancel_file_batch,
            "cancelVectorStoreFileBatch",
            "Cancel a file batch: its files still in progress are cancelled",
            "VectorStoreFileBatch",
        ),
    },
    "/vector_stores/{vector_store_id}/file_batches/{batch_id}/files": {
        "GET": _op(
            files.list_file_batch_files,
            "listFilesInVectorStoreBatch",
            "A file batch's files (filter by status, limit, order, after, before)",
            "VectorStoreFileList",
        ),
    },
}

_COUNTS = {
    "type": "object",
    "properties": {
        name: {"type": "integer"}
        for name in ("in_progress", "completed", "failed", "cancelled", "total")
    },
}
_STRATEGY = {
    "type": ["object", "null"],
    "description": "{'type': 'auto'} (800 tokens, 400 overlapping) or {'type': 'static', "
    "'static': {'max_chunk_size_tokens': 100..4096, 'chunk_overlap_tokens': <= half}}.",
}
_ATTRIBUTES = {
    "type": ["object", "null"],
    "maxProperties": 16,
    "propertyNames": {"maxLength": 64},
    "additionalProperties": {"type": ["string", "number", "boolean"]},
}
_EXPIRES = {
    "type": ["object", "null"],
    "required": ["anchor", "days"],
    "additionalProperties": False,
    "properties": {
        "anchor": {"const": "last_active_at"},
        "days": {"type": "integer", "minimum": 1, "maximum": 365},
    },
}
_METADATA = {
    "type": ["object", "null"],
    "maxProperties": 16,
    "propertyNames": {"maxLength": 64},
    "additionalProperties": {"type": "string", "maxLength": 512},
}


def _list(item: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"$ref": f"#/components/schemas/{item}"}},
            "first_id": {"type": ["string", "null"]},
            "last_id": {"type": ["string", "null"]},
            "has_more": {"type": "boolean"},
        },
    }


VECTOR_STORE_SCHEMAS: dict[str, Any] = {
    "VectorStore": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "vector_store"},
            "created_at": {"type": "integer"},
            "name": {"type": "string"},
            "usage_bytes": {"type": "integer"},
            "file_counts": _COUNTS,
            "status": {"enum": ["expired", "in_progress", "completed"]},
            "expires_after": _EXPIRES,
            "expires_at": {"type": ["integer", "null"]},
            "last_active_at": {"type": ["integer", "null"]},
            "metadata": _METADATA,
        },
    },
    "VectorStoreList": _list("VectorStore"),
    "VectorStoreCreate": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "name": {"type": ["string", "null"], "maxLength": 256},
            "description": {
                "type": ["string", "null"],
                "maxLength": 512,
                "description": "Accepted, not kept.",
            },
            "file_ids": {"type": ["array", "null"], "items": {"type": "string"}, "maxItems": 2000},
            "chunking_strategy": _STRATEGY,
            "expires_after": _EXPIRES,
            "metadata": _METADATA,
        },
    },
    "VectorStoreModify": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "name": {"type": ["string", "null"], "maxLength": 256},
            "expires_after": _EXPIRES,
            "metadata": _METADATA,
        },
    },
    "Deleted": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "deleted": {"const": True},
        },
    },
    "VectorStoreSearch": {
        "type": "object",
        "required": ["query"],
        "additionalProperties": False,
        "properties": {
            "query": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
            },
            "filters": {
                "type": ["object", "null"],
                "description": "Comparison or compound filter.",
            },
            "max_num_results": {"type": "integer", "minimum": 1, "maximum": 50},
            "ranking_options": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "ranker": {"enum": ["auto", "default-2024-11-15", "none"]},
                    "score_threshold": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
            "rewrite_query": {"type": "boolean"},
        },
    },
    "VectorStoreSearchPage": {
        "type": "object",
        "properties": {
            "object": {"const": "vector_store.search_results.page"},
            "search_query": {"type": "array", "items": {"type": "string"}},
            "data": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "file_id": {"type": "string"},
                        "filename": {"type": "string"},
                        "score": {"type": "number"},
                        "attributes": _ATTRIBUTES,
                        "content": {"type": "array", "items": {"type": "object"}},
                    },
                },
            },
            "has_more": {"const": False},
            "next_page": {"type": "null"},
        },
    },
    "VectorStoreFile": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "vector_store.file"},
            "created_at": {"type": "integer"},
            "vector_store_id": {"type": "string"},
            "status": {"enum": ["in_progress", "completed", "failed", "cancelled"]},
            "last_error": {"type": ["object", "null"]},
            "usage_bytes": {"type": "integer"},
            "attributes": _ATTRIBUTES,
            "chunking_strategy": {"type": "object"},
        },
    },
    "VectorStoreFileList": _list("VectorStoreFile"),
    "VectorStoreFileCreate": {
        "type": "object",
        "required": ["file_id"],
        "additionalProperties": False,
        "properties": {
            "file_id": {"type": "string"},
            "attributes": _ATTRIBUTES,
            "chunking_strategy": _STRATEGY,
        },
    },
    "VectorStoreFileUpdate": {
        "type": "object",
        "required": ["attributes"],
        "additionalProperties": False,
        "properties": {"attributes": _ATTRIBUTES},
    },
    "VectorStoreFileContent": {
        "type": "object",
        "properties": {
            "object": {"const": "vector_store.file_content.page"},
            "data": {"type": "array", "items": {"type": "object"}},
            "has_more": {"const": False},
            "next_page": {"type": "null"},
        },
    },
    "VectorStoreFileBatch": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "vector_store.files_batch"},
            "created_at": {"type": "integer"},
            "vector_store_id": {"type": "string"},
            "status": {"enum": ["in_progress", "completed", "cancelled", "failed"]},
            "file_counts": _COUNTS,
        },
    },
    "VectorStoreFileBatchCreate": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "file_ids": {"type": ["array", "null"], "items": {"type": "string"}, "maxItems": 2000},
            "files": {"type": "array", "items": {"type": "object"}, "maxItems": 2000},
            "attributes": _ATTRIBUTES,
            "chunking_strategy": _STRATEGY,
        },
    },
}
