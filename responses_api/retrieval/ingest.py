"""Adding a file to a vector store: read its text, cut it into chunks,
embed them, and write them with the file's status in one transaction, so
that a search sees all of a file's chunks or none.

``embed(texts) -> list[list[float]]`` is given by the caller (the
embeddings endpoint's own function), so that this module decides nothing
about models. :func:`ingest_dispatch` runs the work off the request, on a
thread pool of the process (``SWITCHYARD_RETRIEVAL_INGEST_THREADS``)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connections, transaction

from responses_api.models import Chunk, VectorStore, VectorStoreFile
from responses_api.retrieval import pgvector
from responses_api.retrieval.chunking import Strategy, chunk_text, strategy_parse
from responses_api.retrieval.errors import NotFound, ParseError
from responses_api.retrieval.parsing import extract_text
from responses_api.retrieval.stores import (
    attributes_check,
    store_lock,
    usage_recount,
    vector_store_file_get,
    vector_store_get,
)
from responses_api.retrieval.terms import index_terms
from responses_api.runtime import secrets

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

Embed = Callable[[list[str]], Sequence[Sequence[float]]]
EMBED_BATCH = 64
MAX_DIMENSIONS = 8192
WRITE_BATCH = 1000


class EmbeddingError(Exception):
    pass


class Gone(Exception):
    """The file's entry (or its whole store) was deleted while it was being
    ingested: the ingestion stops there, as nothing is left to write to."""


def vector_store_file_create(
    *,
    organisation_id: int,
    store_id: str,
    file_id: str,
    filename: str = "",
    attributes: dict[str, Any] | None = None,
    chunking_strategy: dict[str, Any] | None = None,
) -> VectorStoreFile:
    """The file's row, ``in_progress`` (a file added again is read again)."""
    strategy = strategy_parse(chunking_strategy)
    checked = attributes_check(attributes)
    store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    found, _ = VectorStoreFile.objects.update_or_create(
        store_id=store.id,
        file_id=file_id,
        defaults={
            "filename": filename,
            "status": VectorStoreFile.Status.IN_PROGRESS,
            "last_error": None,
            "attributes": checked,
            "chunking_strategy": strategy.as_json(),
        },
    )
    return found


def ingest_file(
    organisation_id: int,
    store_id: str,
    file_id: str,
    content: bytes,
    filename: str,
    embed: Embed | None,
    *,
    attributes: dict[str, Any] | None = None,
    chunking_strategy: dict[str, Any] | None = None,
) -> VectorStoreFile:
    """Add a file and ingest it here and now; its row says how it went
    (``completed``, or ``failed`` with ``last_error``)."""
    vector_store_file_create(
        organisation_id=organisation_id,
        store_id=store_id,
        file_id=file_id,
        filename=filename,
        attributes=attributes,
        chunking_strategy=chunking_strategy,
    )
    return vector_store_file_process(
        organisation_id=organisation_id,
        store_id=store_id,
        file_id=file_id,
        content=content,
        embed=embed,
    )


def vector_store_file_process(
    *, organisation_id: int, store_id: str, file_id: str, content: bytes, embed: Embed | None
) -> VectorStoreFile:
    """Ingest a file already added (``in_progress``). With no ``embed`` (a
    store whose organisation has no embedding model) the chunks are indexed
    for keyword search only."""
    found = vector_store_file_get(
        organisation_id=organisation_id, store_id=store_id, file_id=file_id
    )
    if found.status != VectorStoreFile.Status.IN_PROGRESS:
        return found
    import numpy as np  # loaded by the processes that ingest, not by every web process

    try:
        text = extract_text(content, found.filename)
        static = found.chunking_strategy["static"]
        strategy = Strategy(static["max_chunk_size_tokens"], static["chunk_overlap_tokens"])
        pieces = list(chunk_text(text, strategy))
        texts = [piece.text for piece in pieces]
        alive = functools.partial(_in_progress, found.pk)
        vectors = embed_all(texts, embed, alive) if embed is not None else np.zeros((len(texts), 0))
    except ParseError as error:
        return file_fail(found, error.code, error.message)
    except EmbeddingError as error:
        return file_fail(found, "server_error", str(error))
    except Gone:
        log.info("vector store file %s: deleted or cancelled while ingested", found.pk)
        return VectorStoreFile.objects.filter(pk=found.pk).first() or found
    rows = [
        Chunk(
            store_id=store_id,
            file_id=found.pk,
            position=piece.position,
            text=secrets.encrypt(piece.text),
            terms=index_terms(organisation_id, piece.text),
            embedding=vector.astype("<f4").tobytes(),
            tokens=piece.tokens,
        )
        for piece, vector in zip(pieces, vectors, strict=True)
    ]
    dimensions = int(vectors.shape[1]) or None
    in_database = dimensions is not None and pgvector.in_use()
    if in_database:
        pgvector.index_ensure(int(vectors.shape[1]))
    try:
        return _write(found, store_id, rows, vectors, len(text.encode()), in_database)
    except IntegrityError:
        # Only a deletion committed between the locks' check and this
        # commit gets here (the foreign keys are checked at commit); the
        # atomic block has rolled back what it wrote.
        if VectorStoreFile.objects.filter(pk=found.pk).exists():
            raise
        log.info("vector store file %s: deleted while its chunks were written", found.pk)
        return found


def _in_progress(pk: int) -> bool:
    return VectorStoreFile.objects.filter(pk=pk, status=VectorStoreFile.Status.IN_PROGRESS).exists()


def _write(
    found: VectorStoreFile,
    store_id: str,
    rows: list[Chunk],
    vectors: np.ndarray,
    usage_bytes: int,
    in_database: bool,
) -> VectorStoreFile:
    """Write the file's chunks and status in one transaction, under the
    store's lock and then the file's (``stores.store_lock``: the order every
    deletion takes them in)."""
    dimensions = int(vectors.shape[1]) or None
    with transaction.atomic():
        store = store_lock(store_id)
        current = VectorStoreFile.objects.select_for_update().filter(pk=found.pk).first()
        if store is None or current is None or current.status != found.status:
            return current or found  # deleted or cancelled meanwhile
        if dimensions is not None and store.dimensions not in (None, dimensions):
            return file_fail(
                current,
                "server_error",
                f"The embeddings have {dimensions} dimensions; the store's have "
                f"{store.dimensions}.",
            )
        Chunk.objects.filter(file_id=current.pk).delete()
        Chunk.objects.bulk_create(rows, batch_size=WRITE_BATCH)
        if in_database:
            written = [(row.id, current.pk, v) for row, v in zip(rows, vectors, strict=True)]
            pgvector.vectors_write(store_id, written)
        current.status = VectorStoreFile.Status.COMPLETED
        current.usage_bytes = usage_bytes
        current.save(update_fields=["status", "usage_bytes"])
        if store.dimensions is None and dimensions is not None:
            VectorStore.objects.filter(id=store_id).update(dimensions=dimensions)
        usage_recount(store_id)
    return current


def embed_all(
    texts: list[str], embed: Embed, alive: Callable[[], bool] | None = None
) -> np.ndarray:
    """Every text's embedding, float32, checked: as many as texts, one
    width, finite numbers. ``alive`` is asked before each batch: once the
    file is deleted or cancelled, :class:`Gone` rather than embedding (and
    paying for) the rest."""
    import numpy as np

    out: list[np.ndarray] = []
    for start in range(0, len(texts), EMBED_BATCH):
        if alive is not None and not alive():
            raise Gone
        batch = texts[start : start + EMBED_BATCH]
        try:
            got = embed(batch)
        except Exception as error:
            # The embedder is the caller's (a backend behind it): whatever
            # it raises fails this file, not the worker.
            log.warning("Embedding failed: %s", type(error).__name__)
            raise EmbeddingError(f"Embedding the file's chunks failed ({error}).") from None
        try:
            matrix = np.asarray(got, dtype="<f4")
        except (TypeError, ValueError):
            raise EmbeddingError("The embeddings are not lists of numbers.") from None
        if matrix.ndim != 2 or len(matrix) != len(batch):
            raise EmbeddingError(f"{len(batch)} texts gave {len(matrix)} embeddings.")
        if not 1 <= matrix.shape[1] <= MAX_DIMENSIONS or not np.isfinite(matrix).all():
            raise EmbeddingError("The embeddings are not finite vectors of a usable width.")
        out.append(matrix)
    if not out:
        raise EmbeddingError("There was nothing to embed.")
    if len({m.shape[1] for m in out}) > 1:
        raise EmbeddingError("The embeddings differ in width.")
    return np.concatenate(out)


def file_fail(found: VectorStoreFile, code: str, message: str) -> VectorStoreFile:
    """Mark the file failed; an entry deleted meanwhile (alone or with its
    store) stays deleted, and nothing fails for it."""
    found.status = VectorStoreFile.Status.FAILED
    found.last_error = {"code": code, "message": message}
    VectorStoreFile.objects.filter(pk=found.pk).update(
        status=found.status, last_error=found.last_error
    )
    return found


@functools.cache
def _pool() -> ThreadPoolExecutor:
    threads = max(1, settings.SWITCHYARD_RETRIEVAL_INGEST_THREADS)
    return ThreadPoolExecutor(threads, thread_name_prefix="vector-store-ingest")


def ingest_dispatch(
    *,
    organisation_id: int,
    store_id: str,
    file_id: str,
    content: bytes,
    filename: str,
    embed: Embed | None,
    attributes: dict[str, Any] | None = None,
    chunking_strategy: dict[str, Any] | None = None,
) -> tuple[VectorStoreFile, Future[VectorStoreFile | None]]:
    """Add the file now (``in_progress``, what the API answers) and ingest
    it on the process's pool; the future ends with the file's row."""
    found = vector_store_file_create(
        organisation_id=organisation_id,
        store_id=store_id,
        file_id=file_id,
        filename=filename,
        attributes=attributes,
        chunking_strategy=chunking_strategy,
    )
    work = functools.partial(
        _process_in_thread,
        organisation_id=organisation_id,
        store_id=store_id,
        file_id=file_id,
        content=content,
        embed=embed,
    )
    return found, _pool().submit(work)


def _process_in_thread(**arguments: Any) -> VectorStoreFile | None:
    return ingest_guarded(
        functools.partial(vector_store_file_process, **arguments),
        store_id=arguments["store_id"],
        file_id=arguments["file_id"],
    )


def ingest_guarded(
    work: Callable[[], VectorStoreFile | None], *, store_id: str, file_id: str
) -> VectorStoreFile | None:
    """Run ``work`` (an ingestion) off a request, on a pool thread or a
    worker: whatever it raises fails the file instead of leaving it
    ``in_progress``; the thread's database connection is closed after."""
    close_old_connections()
    try:
        return work()
    except NotFound:
        # The store or the entry was deleted before the work read it.
        log.info("vector store %s: file %s deleted before it was ingested", store_id, file_id)
        return None
    except Exception:
        # Nothing a file holds is meant to get here (it fails with its
        # last_error above); a bug must still not leave it in_progress.
        log.exception("Ingesting a vector store file failed")
        found = VectorStoreFile.objects.filter(store_id=store_id, file_id=file_id).first()
        if found is None or found.status != VectorStoreFile.Status.IN_PROGRESS:
            return found
        return file_fail(found, "server_error", "The file could not be ingested.")
    finally:
        connections.close_all()  # this thread's own


def ingest_submit(
    work: Callable[[], VectorStoreFile | None], *, store_id: str, file_id: str
) -> Future[VectorStoreFile | None]:
    """Run ``work`` guarded (:func:`ingest_guarded`) on the process's pool."""
    return _pool().submit(ingest_guarded, work, store_id=store_id, file_id=file_id)
