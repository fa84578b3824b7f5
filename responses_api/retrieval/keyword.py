"""Keyword search over a store's chunks, in the database's own full-text
index: PostgreSQL's tsvector (a stored column under a GIN index) ranked by
``ts_rank`` (at most ``MAX_RANKED`` matches of a query), or SQLite's FTS5
ranked by BM25. Both index the hashed terms
of ``terms`` (``retrieval.terms``); a query is the OR of its terms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

# Placeholders per statement stay below SQLite's limit (32766).
MAX_FILES = 5000
MAX_RANKED = 10_000


def keyword_search(
    store_id: str, terms: Sequence[str], limit: int, file_pks: Sequence[int] | None = None
) -> list[tuple[int, float]]:
    """The ids of the best ``limit`` chunks matching any of ``terms``, best
    first, each with its rank score (higher is better); ``file_pks`` keeps
    only the chunks of those files (a ``filters`` match)."""
    if not terms or (file_pks is not None and not file_pks):
        return []
    params: list[int] = []
    files = ""
    wanted = None
    if file_pks is not None and len(file_pks) <= MAX_FILES:
        files = f" AND c.file_id IN ({', '.join(['%s'] * len(file_pks))})"
        params = list(file_pks)
    elif file_pks is not None:
        # Too many files to name: the best of all chunks, then those of the files.
        wanted, limit = set(file_pks), limit * 10
    if connection.vendor == "postgresql":
        # Ranks at most MAX_RANKED matches: a query of words found in most
        # chunks would otherwise rank them all (the vector side of a hybrid
        # search still sees every chunk).
        sql = (
            "SELECT c.id, ts_rank(c.terms_tsv, q.q) AS rank, c.file_id "
            "FROM (SELECT to_tsquery('simple', %s) AS q) q CROSS JOIN LATERAL ("
            "SELECT id, terms_tsv, file_id FROM responses_api_chunk "
            f"WHERE store_id = %s AND terms_tsv @@ q.q{files.replace('c.', '')} LIMIT %s) c "
            "ORDER BY rank DESC, c.id LIMIT %s"
        )
        arguments: list[Any] = [" | ".join(terms), store_id, *params, MAX_RANKED, limit]
    else:
        query = " OR ".join(f'"{term}"' for term in terms)
        sql = (
            "SELECT c.id, -bm25(responses_api_chunk_fts) AS rank, c.file_id "
            "FROM responses_api_chunk_fts JOIN responses_api_chunk c "
            "ON c.id = responses_api_chunk_fts.rowid "
            f"WHERE responses_api_chunk_fts MATCH %s AND c.store_id = %s{files} "
            "ORDER BY rank DESC, c.id LIMIT %s"
        )
        arguments = [query, store_id, *params, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, arguments)
        rows = cursor.fetchall()
    return [(int(row[0]), float(row[1])) for row in rows if wanted is None or row[2] in wanted]
