"""Hybrid search of a vector store: the chunks nearest the query's
embedding (``vectors``) and those matching its words (``keyword``), fused.

``ranking_options.ranker``:

- ``auto`` / ``default-2024-11-15`` (the default): reciprocal rank fusion
  of the two rankings (each chunk scores ``1 / (60 + rank)`` in each list
  it is in), scaled so that a chunk first in both scores 1.0; ``score`` is
  that fused score.
- ``none``: the vector ranking alone, ``score`` the cosine similarity
  (clipped to 0..1); the keyword ranking when no embedder is given.

``score_threshold`` drops results scoring below it. ``rewrite_query``
searches for the query's normalised words (``terms.rewrite``), which the
page reports as ``search_query``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from responses_api.models import Chunk, VectorStoreFile
from responses_api.retrieval import keyword
from responses_api.retrieval.errors import InvalidParameter
from responses_api.retrieval.filters import filter_parse
from responses_api.retrieval.stores import vector_store_get, vector_store_touch
from responses_api.retrieval.terms import query_terms, rewrite
from responses_api.runtime import secrets

Embed = Callable[[list[str]], Sequence[Sequence[float]]]
RANKERS = ("auto", "default-2024-11-15", "none")
RRF_K = 60
MAX_QUERY_CHARS = 4096


def options_check(query: Any, max_num_results: Any, ranking_options: Any) -> tuple[str, str, float]:
    """(query, ranker, score_threshold), or InvalidParameter."""
    if isinstance(query, list) and query and all(isinstance(q, str) for q in query):
        query = " ".join(query)
    if not isinstance(query, str) or not query.strip():
        raise InvalidParameter("query must be a non-empty string or list of strings.", "query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidParameter(f"query is longer than {MAX_QUERY_CHARS} characters.", "query")
    if type(max_num_results) is not int or not 1 <= max_num_results <= 50:
        raise InvalidParameter(
            "max_num_results must be an integer from 1 to 50.", "max_num_results"
        )
    options = ranking_options or {}
    if not isinstance(options, dict) or not set(options) <= {"ranker", "score_threshold"}:
        raise InvalidParameter(
            "ranking_options takes 'ranker' and 'score_threshold'.", "ranking_options"
        )
    ranker = options.get("ranker", "auto")
    if ranker not in RANKERS:
        raise InvalidParameter(
            f"ranking_options.ranker must be one of {', '.join(RANKERS)}.",
            "ranking_options.ranker",
        )
    threshold = options.get("score_threshold", 0.0)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        threshold = -1
    if not 0 <= threshold <= 1:
        raise InvalidParameter(
            "ranking_options.score_threshold must be a number from 0 to 1.",
            "ranking_options.score_threshold",
        )
    return query, ranker, float(threshold)


def vector_store_search(
    *,
    organisation_id: int,
    store_id: str,
    query: str | list[str],
    embed: Embed | None = None,
    filters: dict[str, Any] | None = None,
    max_num_results: int = 10,
    ranking_options: dict[str, Any] | None = None,
    rewrite_query: bool = False,
) -> dict[str, Any]:
    """OpenAI's search results page: ``search_query`` and ``data``, each
    result a chunk with its file's id, name and attributes."""
    text, ranker, threshold = options_check(query, max_num_results, ranking_options)
    predicate = filter_parse(filters) if filters is not None else None
    store = vector_store_get(organisation_id=organisation_id, store_id=store_id)
    searched = rewrite(text) if rewrite_query else text
    page: dict[str, Any] = {
        "object": "vector_store.search_results.page",
        "search_query": [searched],
        "data": [],
        "has_more": False,
        "next_page": None,
    }
    files = VectorStoreFile.objects.filter(store_id=store.id, status="completed")
    allowed: list[int] | None = None
    if predicate is not None:
        allowed = [pk for pk, attrs in files.values_list("id", "attributes") if predicate(attrs)]
        if not allowed:
            return page
    wanted = max(4 * max_num_results, 40)
    by_vector: list[tuple[int, float]] = []
    if embed is not None and store.dimensions:
        by_vector = _nearest(store, searched, embed, wanted, allowed)
    by_words = keyword.keyword_search(
        store.id, query_terms(organisation_id, searched), wanted, allowed
    )
    if ranker == "none":
        ranked = [(key, max(0.0, min(1.0, s))) for key, s in by_vector] if embed else []
        ranked = ranked or fused([by_words])
    else:
        ranked = fused([by_vector, by_words] if embed is not None else [by_words])
    best = [(key, score) for key, score in ranked if score >= threshold][:max_num_results]
    page["data"] = _results(best)
    vector_store_touch(store)
    return page


def fused(rankings: list[list[tuple[int, float]]]) -> list[tuple[int, float]]:
    """Reciprocal rank fusion, scaled to 0..1 (1: first in every ranking)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (key, _) in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
    top = len(rankings) / (RRF_K + 1)
    return sorted(((key, s / top) for key, s in scores.items()), key=lambda x: (-x[1], x[0]))


def _nearest(
    store: Any, text: str, embed: Embed, wanted: int, allowed: list[int] | None
) -> list[tuple[int, float]]:
    # numpy and the vector index load only in a process that searches vectors.
    import numpy as np

    from responses_api.retrieval import pgvector
    from responses_api.retrieval.vectors import indexes

    vector = np.asarray(embed([text]), dtype=np.float32)
    if vector.shape != (1, store.dimensions) or not np.isfinite(vector).all():
        raise InvalidParameter(
            f"The query's embedding does not match the store's {store.dimensions} dimensions.",
            "query",
        )
    norm = float(np.linalg.norm(vector[0]))
    query = vector[0] / (norm or 1.0)
    if pgvector.in_use():
        return pgvector.nearest(store, query, wanted, allowed)
    vectors = indexes.synced(store.id, store.index_version, store.dimensions)
    keys = None
    if allowed is not None:
        chunks = Chunk.objects.filter(store_id=store.id, file_id__in=allowed)
        keys = np.fromiter(chunks.values_list("id", flat=True).iterator(), dtype=np.uint64)
    return vectors.search(query, wanted, keys)


def _results(best: list[tuple[int, float]]) -> list[dict[str, Any]]:
    if not best:
        return []
    # One query by primary key, reading only what the page shows (not the
    # embedding, which is stored out of line, nor the hashed terms).
    rows = (
        Chunk.objects.filter(id__in=[key for key, _ in best])
        .select_related("file")
        .only("id", "text", "file__file_id", "file__filename", "file__attributes")
    )
    chunks = {chunk.id: chunk for chunk in rows}
    results = []
    for key, score in best:
        chunk = chunks.get(key)
        if chunk is None:  # deleted since it was ranked
            continue
        results.append(
            {
                "file_id": chunk.file.file_id,
                "filename": chunk.file.filename,
                "score": round(score, 6),
                "attributes": chunk.file.attributes,
                "content": [{"type": "text", "text": secrets.decrypt(chunk.text)}],
            }
        )
    return results
