"""Rewriting the keyword index after the first encryption key changed.

A chunk's ``terms`` are its words hashed under a key derived from the first
encryption key (``terms``): a new first key hashes every word differently,
so chunks indexed before the rotation would no longer match a query once
the old key is unlisted. Their text is kept encrypted (Fernet, every
listed key opens it), so the terms can be computed again from it, with no
file read again nor embedded again; the text is encrypted again under the
new key on the way, so that the old key is no longer needed for chunks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cryptography.fernet import InvalidToken

from responses_api.models import Chunk
from responses_api.retrieval.terms import index_terms
from responses_api.runtime import secrets

BATCH = 500


@dataclass
class Reindexed:
    chunks: int = 0
    updated: int = 0
    # Chunks whose text no listed key opens: left as they are.
    unreadable: int = 0


def keywords_reindex(
    organisation_id: int,
    *,
    batch: int = BATCH,
    progress: Callable[[Reindexed, int], None] | None = None,
) -> Reindexed:
    """Recompute the organisation's chunks' terms (and encrypt their text)
    under the current key, in
    batches of ``batch`` chunks by id (each batch one short transaction);
    only the chunks whose terms differ are written, so running it again
    writes nothing. ``progress`` hears the counts after each batch, and the
    number of chunks in all."""
    chunks = Chunk.objects.filter(store__organisation_id=organisation_id)
    total = chunks.count()
    done = Reindexed()
    last = 0
    while True:
        rows = list(chunks.filter(id__gt=last).order_by("id").only("id", "text", "terms")[:batch])
        if not rows:
            return done
        changed = []
        for chunk in rows:
            try:
                plain, token = secrets.decrypt_rotating(chunk.text)
            except InvalidToken:
                done.unreadable += 1
                continue
            terms = index_terms(organisation_id, plain.decode())
            if terms != chunk.terms or token is not None:
                chunk.terms = terms
                chunk.text = token or chunk.text
                changed.append(chunk)
        # A chunk deleted meanwhile updates no row.
        Chunk.objects.bulk_update(changed, ["text", "terms"])
        done.chunks += len(rows)
        done.updated += len(changed)
        last = rows[-1].id
        if progress is not None:
            progress(done, total)
