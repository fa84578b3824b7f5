"""Vector stores and their files: the service functions that
``/v1/vector_stores`` and ``file_search`` call. Every one takes the
caller's ``organisation_id``; another organisation's store is a
:class:`NotFound` with the same message as a missing one."""

from __future__ import annotations

import secrets as tokens
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from responses_api.models import Chunk, ServedModel, VectorStore, VectorStoreFile
from responses_api.retrieval.errors import InvalidParameter, NotFound
from responses_api.runtime import secrets

MAX_ATTRIBUTES = 16
MAX_KEY, MAX_VALUE = 64, 512


def new_store_id() -> str:
    return "vs_" + tokens.token_hex(16)


def store_missing(store_id: str) -> NotFound:
    return NotFound(f"No vector store found with id '{store_id}'.")


def attributes_check(attributes: Any, param: str = "attributes") -> dict[str, Any]:
    """OpenAI's limits: 16 keys of at most 64 characters, values strings of
    at most 512 characters, numbers or booleans."""
    if attributes is None:
        return {}
    if not isinstance(attributes, dict) or len(attributes) > MAX_ATTRIBUTES:
        raise InvalidParameter("attributes must be an object of at most 16 keys.", param)
    for key, value in attributes.items():
        if len(key) > MAX_KEY:
            raise InvalidParameter(f"Attribute keys are at most {MAX_KEY} characters.", param)
        if isinstance(value, str) and len(value) > MAX_VALUE:
            raise InvalidParameter(
                f"Attribute '{key}' is longer than {MAX_VALUE} characters.", f"{param}.{key}"
            )
        if not isinstance(value, (str, int, float, bool)):
            raise InvalidParameter(
                f"Attribute '{key}' must be a string, number or boolean.", f"{param}.{key}"
            )
    return dict(attributes)


def expires_after_check(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or value.get("anchor") != "last_active_at"
        or set(value) != {"anchor", "days"}
        or type(value["days"]) is not int
        or not 1 <= value["days"] <= 365
    ):
        raise InvalidParameter(
            "expires_after must be {'anchor': 'last_active_at', 'days': 1..365}.",
            "expires_after",
        )
    return dict(value)


def organisation_embedding_model(organisation_id: int) -> str:
    """The model a new store of the organisation embeds with: its first
    embedding model by public id (predictable, and changed by renaming or
    adding a model), or "" when it has none (keyword search only)."""
    first = (
        ServedModel.objects.filter(organisation_id=organisation_id, kind="embed")
        .order_by("public_id")
        .values_list("public_id", flat=True)
        .first()
    )
    return first or ""


def vector_store_create(
    *,
    organisation_id: int,
    name: str = "",
    metadata: dict[str, str] | None = None,
    expires_after: dict[str, Any] | None = None,
    embedding_model: str | None = None,
) -> VectorStore:
    """A new store; ``embedding_model`` None picks the organisation's
    (:func:`organisation_embedding_model`)."""
    expires_after = expires_after_check(expires_after)
    if embedding_model is None:
        embedding_model = organisation_embedding_model(organisation_id)
    now = timezone.now()
    return VectorStore.objects.create(
        id=new_store_id(),
        organisation_id=organisation_id,
        name=name,
        metadata=metadata or {},
        embedding_model=embedding_model,
        expires_after=expires_after,
        expires_at=now + timedelta(days=expires_after["days"]) if expires_after else None,
        last_active_at=now,
        created_at=now,
    )


def vector_store_get(*, organisation_id: int, store_id: str) -> VectorStore:
    """The organisation's store, unexpired, or NotFound."""
    store = VectorStore.objects.filter(id=store_id, organisation_id=organisation_id).first()
    if store is None or (store.expires_at is not None and store.expires_at <= timezone.now()):
        raise store_missing(store_id)
    return store


def vector_store_list(*, organisation_id: int) -> Any:
    """The organisation's unexpired stores (an expired one is gone for it,
    as for :func:`vector_store_get`, until the purge deletes it)."""
    live = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    return VectorStore.objects.filter(live, organisation_id=organisation_id)


def vector_store_touch(store: VectorStore) -> None:
    """``last_active_at`` (and the expiry anchored on it), written at most
    once a minute, so that searches do not each write a row."""
    now = timezone.now()
    if now - store.last_active_at < timedelta(minutes=1):
        return
    fields: dict[str, Any] = {"last_active_at": now}
    if store.expires_after:
        fields["expires_at"] = now + timedelta(days=store.expires_after["days"])
    VectorStore.objects.filter(id=store.id).update(**fields)


def store_lock(store_id: str) -> VectorStore | None:
    """Lock the store's row for the rest of the transaction (None: gone).

    Every deletion of a store's chunks takes it before anything else, and
    ingestion takes it before writing chunks: an ingestion that comes second
    waits, then finds the store or its file gone and writes nothing; a
    deletion that comes second waits, then deletes the chunks just written.
    Without it a deletion could delete the chunks it saw and then the row,
    while an ingestion committed chunks in between, which the foreign key
    then refuses at the deletion's commit."""
    return VectorStore.objects.select_for_update().filter(id=store_id).first()


def _store_drop(store_id: str) -> None:
    """Delete a store whose row this transaction has locked, children first."""
    Chunk.objects.filter(store_id=store_id).delete()
    VectorStoreFile.objects.filter(store_id=store_id).delete()
    VectorStore.objects.filter(id=store_id).delete()


def vector_store_delete(*, organisation_id: int, store_id: str) -> None:
    """The store, its files, their chunks and vectors."""
    with transaction.atomic():
        store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
        if store_lock(store.id) is None:
            raise store_missing(store_id)  # deleted by another meanwhile
        _store_drop(store.id)
    _forget(store_id)


def file_counts(store: VectorStore) -> dict[str, int]:
    """OpenAI's ``file_counts``, counted from the files."""
    counts = {status: 0 for status in VectorStoreFile.Status.values}
    rows = VectorStoreFile.objects.filter(store_id=store.id).values("status")
    for row in rows.annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    return {**counts, "total": sum(counts.values())}


def store_status(store: VectorStore, counts: dict[str, int]) -> str:
    if store.expires_at is not None and store.expires_at <= timezone.now():
        return "expired"
    return "in_progress" if counts["in_progress"] else "completed"


def vector_store_json(store: VectorStore) -> dict[str, Any]:
    """The store as OpenAI's ``VectorStore`` object."""
    counts = file_counts(store)
    return {
        "id": store.id,
        "object": "vector_store",
        "created_at": int(store.created_at.timestamp()),
        "name": store.name,
        "usage_bytes": store.usage_bytes,
        "file_counts": counts,
        "status": store_status(store, counts),
        "expires_after": store.expires_after,
        "expires_at": int(store.expires_at.timestamp()) if store.expires_at else None,
        "last_active_at": int(store.last_active_at.timestamp()),
        "metadata": store.metadata,
    }


def vector_store_file_json(file: VectorStoreFile) -> dict[str, Any]:
    """As OpenAI's ``VectorStoreFile`` object."""
    return {
        "id": file.file_id,
        "object": "vector_store.file",
        "created_at": int(file.created_at.timestamp()),
        "vector_store_id": file.store_id,
        "status": file.status,
        "last_error": file.last_error,
        "usage_bytes": file.usage_bytes,
        "attributes": file.attributes,
        "chunking_strategy": file.chunking_strategy,
    }


def vector_store_file_get(*, organisation_id: int, store_id: str, file_id: str) -> VectorStoreFile:
    store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    found = VectorStoreFile.objects.filter(store_id=store.id, file_id=file_id).first()
    if found is None:
        raise NotFound(f"No file found with id '{file_id}' in vector store '{store_id}'.")
    return found


def vector_store_file_list(
    *, organisation_id: int, store_id: str, status: str | None = None
) -> Any:
    store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    files = VectorStoreFile.objects.filter(store_id=store.id)
    return files.filter(status=status) if status else files


def vector_store_file_delete(*, organisation_id: int, store_id: str, file_id: str) -> None:
    """The file's chunks and vectors go with it (the other processes'
    caches drop them at their next search: the version moves)."""
    with transaction.atomic():
        found = vector_store_file_get(
            organisation_id=organisation_id, store_id=store_id, file_id=file_id
        )
        # The store's row first, as ingestion locks it (store_lock), then the
        # file's: the same order everywhere, so that neither waits on the other.
        store_lock(store_id)
        if not VectorStoreFile.objects.select_for_update().filter(pk=found.pk).exists():
            raise NotFound(f"No file found with id '{file_id}' in vector store '{store_id}'.")
        Chunk.objects.filter(file_id=found.pk).delete()
        VectorStoreFile.objects.filter(pk=found.pk).delete()
        usage_recount(store_id)


def usage_recount(store_id: str) -> None:
    """The store's ``usage_bytes`` from its files', and a new index version:
    called in the transaction of every write to its chunks."""
    total = VectorStoreFile.objects.filter(store_id=store_id).aggregate(n=Sum("usage_bytes"))["n"]
    VectorStore.objects.filter(id=store_id).update(
        usage_bytes=total or 0, index_version=F("index_version") + 1
    )


def vector_store_update(
    *,
    organisation_id: int,
    store_id: str,
    changes: dict[str, Any],
) -> VectorStore:
    """``name``, ``metadata`` and ``expires_after`` (None: never expires),
    those of ``changes`` given."""
    store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    fields = []
    if "name" in changes:
        store.name = changes["name"] or ""
        fields.append("name")
    if "metadata" in changes:
        store.metadata = changes["metadata"] or {}
        fields.append("metadata")
    if "expires_after" in changes:
        store.expires_after = expires_after_check(changes["expires_after"])
        days = store.expires_after["days"] if store.expires_after else None
        store.expires_at = store.last_active_at + timedelta(days=days) if days else None
        fields += ["expires_after", "expires_at"]
    if fields:
        store.save(update_fields=fields)
    return store


def file_detach(*, organisation_id: int, file_id: str) -> int:
    """Take a file deleted from the Files API out of every store of its
    organisation: its entries, chunks and vectors. How many it was in."""
    entries = VectorStoreFile.objects.filter(
        file_id=file_id, store__organisation_id=organisation_id
    )
    stores = sorted(set(entries.values_list("store_id", flat=True)))
    with transaction.atomic():
        for store_id in stores:  # in order, so that two detachments cannot deadlock
            if store_lock(store_id) is None:
                continue
            found = VectorStoreFile.objects.select_for_update().filter(
                store_id=store_id, file_id=file_id
            )
            pks = list(found.values_list("pk", flat=True))
            Chunk.objects.filter(file_id__in=pks).delete()
            VectorStoreFile.objects.filter(pk__in=pks).delete()
            usage_recount(store_id)
    return len(stores)


def vector_stores_purge(*, batch: int = 100) -> int:
    """Delete the stores past their ``expires_at`` (reads ignore them already)."""
    purged = 0
    now = timezone.now()
    while True:
        expired = list(
            VectorStore.objects.filter(expires_at__lte=now).values_list("id", flat=True)[:batch]
        )
        for store_id in expired:
            with transaction.atomic():
                if store_lock(store_id) is not None:
                    _store_drop(store_id)
            _forget(store_id)
        purged += len(expired)
        if len(expired) < batch:
            return purged


def vector_store_file_update(
    *, organisation_id: int, store_id: str, file_id: str, attributes: Any
) -> VectorStoreFile:
    checked = attributes_check(attributes)
    found = vector_store_file_get(
        organisation_id=organisation_id, store_id=store_id, file_id=file_id
    )
    found.attributes = checked
    found.save(update_fields=["attributes"])
    return found


def vector_store_file_pk(*, organisation_id: int, store_id: str, file_id: str) -> int:
    """The row behind the store's file, for :func:`vector_store_file_texts`;
    ``NotFound`` for a file the organisation's store does not have."""
    found = vector_store_file_get(
        organisation_id=organisation_id, store_id=store_id, file_id=file_id
    )
    return found.pk


def vector_store_file_texts(*, file_pk: int, after: int, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` of the file's chunks after position ``after`` (-1:
    from the first), decrypted, in order, each with its position: read a
    page at a time, a file's text is never held whole (empty until it is
    completed)."""
    chunks = Chunk.objects.filter(file_id=file_pk, position__gt=after).order_by("position")
    return [
        (position, secrets.decrypt(text))
        for position, text in chunks.values_list("position", "text")[:limit]
    ]


def _forget(store_id: str) -> None:
    """Drop the store's vectors from this process's index cache. Imported
    here: numpy and the index load only in a process that searches."""
    from responses_api.retrieval.vectors import indexes

    indexes.forget(store_id)
