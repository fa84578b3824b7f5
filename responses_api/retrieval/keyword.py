"""Keyword search over a store's chunks, in the database's own full-text
index: on PostgreSQL a narrow table of the chunks' tsvectors under a GIN
index (``responses_api_chunk_terms``, kept by triggers, migration 0022)
ranked by ``ts_rank``; on SQLite an FTS5 table ranked by BM25. Both index
the hashed terms of ``terms`` (``retrieval.terms``); a query is the OR of
its terms.

On PostgreSQL the work of a query is bounded: each term brings at most
``MAX_RANKED / len(terms)`` of its matches to be ranked (every match of a
term rarer than that), and the candidates are ranked with the whole query.
A rare word's chunks are therefore always ranked, while a word found in a
large share of the store (which ranks nothing apart) brings a bounded
sample instead of its whole posting list; the vector side of a hybrid
search still sees every chunk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

# Placeholders per statement stay below SQLite's limit (32766).
MAX_FILES = 5000
MAX_RANKED = 10_000
# A long query still brings this many matches of each term (at most
# MAX_QUERY_TERMS of them, retrieval.terms).
MIN_PER_TERM = 250


def keyword_search(
    store_id: str, terms: Sequence[str], limit: int, file_pks: Sequence[int] | None = None
) -> list[tuple[int, float]]:
    """The ids of the best ``limit`` chunks matching any of ``terms``, best
    first, each with its rank score (higher is better); ``file_pks`` keeps
    only the chunks of those files (a ``filters`` match)."""
    if not terms or (file_pks is not None and not file_pks):
        return []
    files: list[int] = []
    wanted = None
    if file_pks is not None and len(file_pks) <= MAX_FILES:
        files = list(file_pks)
    elif file_pks is not None:
        # Too many files to name: the best of all chunks, then those of the files.
        wanted, limit = set(file_pks), limit * 10
    if connection.vendor == "postgresql":
        sql, arguments = _postgres(store_id, terms, limit, files)
    else:
        sql, arguments = _sqlite(store_id, terms, limit, files)
    with connection.cursor() as cursor:
        cursor.execute(sql, arguments)
        rows = cursor.fetchall()
    return [(int(row[0]), float(row[1])) for row in rows if wanted is None or row[2] in wanted]


def _postgres(
    store_id: str, terms: Sequence[str], limit: int, files: list[int]
) -> tuple[str, list[Any]]:
    # One GIN lookup per term, each with its own LIMIT, so that the planner
    # sees each term and a common one stops early. Each match is ranked
    # against the whole query where it is read; a chunk that several terms
    # bring is counted once (GROUP BY on small rows, not a sort of tsvectors).
    in_files = " AND file_id = ANY(%s)" if files else ""
    each = (
        "(SELECT chunk_id, file_id, ts_rank(terms_tsv, to_tsquery('simple', %s)) AS rank "
        "FROM responses_api_chunk_terms "
        f"WHERE store_id = %s AND terms_tsv @@ to_tsquery('simple', %s){in_files} LIMIT %s)"
    )
    per_term = max(MIN_PER_TERM, MAX_RANKED // len(terms))
    whole = " | ".join(terms)
    arguments: list[Any] = []
    for term in terms:
        arguments += [whole, store_id, term, *([files] if files else []), per_term]
    arguments.append(limit)
    sql = (
        "SELECT chunk_id, max(rank) AS best, max(file_id) "
        f"FROM ({' UNION ALL '.join([each] * len(terms))}) c "
        "GROUP BY chunk_id ORDER BY best DESC, chunk_id LIMIT %s"
    )
    return sql, arguments


def _sqlite(
    store_id: str, terms: Sequence[str], limit: int, files: list[int]
) -> tuple[str, list[Any]]:
    in_files = f" AND c.file_id IN ({', '.join(['%s'] * len(files))})" if files else ""
    query = " OR ".join(f'"{term}"' for term in terms)
    sql = (
        "SELECT c.id, -bm25(responses_api_chunk_fts) AS rank, c.file_id "
        "FROM responses_api_chunk_fts JOIN responses_api_chunk c "
        "ON c.id = responses_api_chunk_fts.rowid "
        f"WHERE responses_api_chunk_fts MATCH %s AND c.store_id = %s{in_files} "
        "ORDER BY rank DESC, c.id LIMIT %s"
    )
    return sql, [query, store_id, *files, limit]
