"""File batches of a vector store (``vsfb_…``): files added together, whose
counts and status are their files'. Cancelling one cancels its files still
in progress; ingestion leaves a cancelled file as it is."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction
from django.db.models import Count

from responses_api.models import VectorStoreFile, VectorStoreFileBatch
from responses_api.retrieval.errors import NotFound
from responses_api.retrieval.stores import vector_store_get


def batch_create(*, organisation_id: int, store_id: str) -> VectorStoreFileBatch:
    store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    return VectorStoreFileBatch.objects.create(
        id="vsfb_" + secrets.token_hex(16), store_id=store.id
    )


def batch_get(*, organisation_id: int, store_id: str, batch_id: str) -> VectorStoreFileBatch:
    store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    found = VectorStoreFileBatch.objects.filter(id=batch_id, store_id=store.id).first()
    if found is None:
        raise NotFound(f"No file batch found with id '{batch_id}' in vector store '{store_id}'.")
    return found


def batch_files(batch: VectorStoreFileBatch) -> Any:
    return VectorStoreFile.objects.filter(store_id=batch.store_id, batch_id=batch.id)


def batch_cancel(*, organisation_id: int, store_id: str, batch_id: str) -> VectorStoreFileBatch:
    with transaction.atomic():
        batch = batch_get(organisation_id=organisation_id, store_id=store_id, batch_id=batch_id)
        batch_files(batch).filter(status=VectorStoreFile.Status.IN_PROGRESS).update(
            status=VectorStoreFile.Status.CANCELLED
        )
        batch.cancelled = True
        batch.save(update_fields=["cancelled"])
    return batch


def batch_json(batch: VectorStoreFileBatch) -> dict[str, Any]:
    """As OpenAI's ``VectorStoreFileBatch``."""
    counts = {status: 0 for status in VectorStoreFile.Status.values}
    for row in batch_files(batch).values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    if batch.cancelled:
        status = "cancelled"
    elif counts["in_progress"]:
        status = "in_progress"
    elif counts["failed"] and not counts["completed"]:
        status = "failed"
    else:
        status = "completed"
    return {
        "id": batch.id,
        "object": "vector_store.files_batch",
        "created_at": int(batch.created_at.timestamp()),
        "vector_store_id": batch.store_id,
        "status": status,
        "file_counts": {**counts, "total": sum(counts.values())},
    }
