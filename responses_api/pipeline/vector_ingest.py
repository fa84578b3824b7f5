"""Adding Files API files to a vector store, and ingesting them off the
request: on a Celery worker in production (``tasks.ingest_vector_store_file``,
by ids), on the process's ingestion pool in the embedded default, chosen as
background responses choose (``SWITCHYARD_BACKGROUND_RUNNER``; unset: Celery
when it has a broker of its own).

:func:`ingest_added` is the one domain function both run: it reads the
file (decrypted, ``files.selectors.file_content_for``) and hands it to
``retrieval.ingest`` with an embedder that embeds through
``embed_for_organisation`` as the organisation's own work, so that every
batch of chunks embedded is a usage row of the organisation (no key)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction

from responses_api.access.auth import organisation_caller
from responses_api.backends.client import close_clients
from responses_api.files.selectors import file_content_for, file_get
from responses_api.models import FileRecord, VectorStore, VectorStoreFile
from responses_api.pipeline.embedding import embed_for_organisation
from responses_api.retrieval.errors import NotFound
from responses_api.retrieval.ingest import (
    Embed,
    file_fail,
    ingest_guarded,
    ingest_submit,
    vector_store_file_create,
    vector_store_file_process,
)
from responses_api.retrieval.stores import vector_store_file_get, vector_store_get
from responses_api.runtime import redis_conn

TASK = "responses_api.tasks.ingest_vector_store_file"


class FileMissing(NotFound):
    """A file id the organisation's Files API does not have."""

    def __init__(self, file_id: str) -> None:
        super().__init__(f"No such File object: {file_id[:100]}")
        self.file_id = file_id


def store_embedder(organisation_id: int, model: str) -> Embed | None:
    """The store's embedder for ingestion (None: keyword only), each call
    one request of the organisation's own, on an event loop of its own."""
    if not model:
        return None
    caller = organisation_caller(organisation_id)

    async def run(texts: list[str]) -> list[list[float]]:
        try:
            embedded = await embed_for_organisation(caller, model=model, texts=texts)
            return embedded.vectors
        finally:
            await close_clients()
            await redis_conn.close_loop_clients()

    def embed(texts: list[str]) -> Sequence[Sequence[float]]:
        return async_to_sync(run)(texts)

    return embed


def files_add(
    *,
    organisation_id: int,
    store_id: str,
    entries: list[dict[str, Any]],
    batch_id: str = "",
) -> list[VectorStoreFile]:
    """Add files (``{"file_id", "attributes"?, "chunking_strategy"?}``) to
    the store, ``in_progress``, all or none: an unknown file id raises
    :class:`FileMissing` before any is added. Start them with
    :func:`ingest_start` once committed."""
    vector_store_get(organisation_id=organisation_id, store_id=store_id)
    records = {}
    for entry in entries:
        record = file_get(organisation_id=organisation_id, file_id=entry["file_id"])
        if record is None:
            raise FileMissing(entry["file_id"])
        records[entry["file_id"]] = record
    added = []
    with transaction.atomic():
        for entry in entries:
            found = vector_store_file_create(
                organisation_id=organisation_id,
                store_id=store_id,
                file_id=entry["file_id"],
                filename=records[entry["file_id"]].filename,
                attributes=entry.get("attributes"),
                chunking_strategy=entry.get("chunking_strategy"),
            )
            if batch_id or found.batch_id:
                found.batch_id = batch_id
                found.save(update_fields=["batch_id"])
            added.append(found)
    return added


def on_celery() -> bool:
    """Whether ingestion runs on Celery: as background responses decide."""
    chosen = settings.SWITCHYARD_BACKGROUND_RUNNER
    if chosen:
        return bool(chosen == "celery")
    return bool(settings.REDIS_URL) and not settings.CELERY_TASK_ALWAYS_EAGER


def ingest_start(*, organisation_id: int, store_id: str, file_ids: list[str]) -> None:
    """Hand each added file's ingestion to a worker or the pool."""
    for file_id in file_ids:
        if on_celery():
            _celery().send_task(TASK, args=[organisation_id, store_id, file_id])
        else:
            work = functools.partial(ingest_added, organisation_id, store_id, file_id)
            ingest_submit(work, store_id=store_id, file_id=file_id)


def ingest_on_worker(organisation_id: int, store_id: str, file_id: str) -> None:
    """A Celery worker's ingestion of one file."""
    work = functools.partial(ingest_added, organisation_id, store_id, file_id)
    ingest_guarded(work, store_id=store_id, file_id=file_id)


def ingest_added(organisation_id: int, store_id: str, file_id: str) -> VectorStoreFile | None:
    """Read the added file and ingest it; None when the store or its entry
    is gone meanwhile. A file deleted from the Files API before it is read
    fails (``invalid_file``)."""
    try:
        found = vector_store_file_get(
            organisation_id=organisation_id, store_id=store_id, file_id=file_id
        )
    except NotFound:
        return None
    if found.status != VectorStoreFile.Status.IN_PROGRESS:
        return found
    try:
        _, content = file_content_for(organisation_id, file_id)
    except FileRecord.DoesNotExist:
        return file_fail(found, "invalid_file", "The file was deleted before it was read.")
    model = VectorStore.objects.filter(id=store_id).values_list("embedding_model", flat=True)
    return vector_store_file_process(
        organisation_id=organisation_id,
        store_id=store_id,
        file_id=file_id,
        content=content,
        embed=store_embedder(organisation_id, model.first() or ""),
    )


@functools.cache
def _celery() -> Any:
    """A Celery app that only sends tasks, made at the first one."""
    from celery import Celery

    app = Celery("switchyard")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    return app
