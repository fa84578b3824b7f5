"""The in-memory vector index: in step with the database through the
store's version, exact below ``ann_min``, a graph above it."""

from __future__ import annotations

import numpy as np
import pytest

from responses_api.models import VectorStore
from responses_api.retrieval import vectors
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.search import vector_store_search
from responses_api.retrieval.stores import vector_store_file_delete
from responses_api.retrieval.vectors import IndexCache, StoreVectors, indexes

STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}


def long_text(topic: str, chunks: int) -> bytes:
    sentence = f"{topic} sentence number {{}} says something. "
    return "".join(sentence.format(i) for i in range(chunks * 12)).encode()


def add(people, store, embed, file_id, content):
    done = ingest_file(
        people["acme"].id,
        store.id,
        file_id,
        content,
        f"{file_id}.txt",
        embed,
        chunking_strategy=STATIC,
    )
    assert done.status == "completed", done.last_error
    return done


def found_files(people, store, embed, query, **options):
    page = vector_store_search(
        organisation_id=people["acme"].id,
        store_id=store.id,
        query=query,
        embed=embed,
        ranking_options={"ranker": "none"},
        **options,
    )
    return {r["file_id"] for r in page["data"]}


def test_a_store_past_ann_min_is_searched_through_the_graph_and_stays_in_step(
    people, acme_store, embed
):
    indexes.ann_min = 50
    add(people, acme_store, embed, "file-zebra", long_text("zebra", 60))
    assert found_files(people, acme_store, embed, "zebra") == {"file-zebra"}
    cached = indexes.stores[acme_store.id]
    assert cached.ann is not None and len(cached) >= 60

    add(people, acme_store, embed, "file-okapi", long_text("okapi", 5))
    assert "file-okapi" in found_files(people, acme_store, embed, "okapi")
    assert len(cached.ann_keys) == len(cached)

    vector_store_file_delete(
        organisation_id=people["acme"].id, store_id=acme_store.id, file_id="file-zebra"
    )
    assert found_files(people, acme_store, embed, "zebra", max_num_results=50) == {"file-okapi"}
    assert len(cached) == len(cached.ann_keys) and len(cached) < 20


def test_a_search_at_an_unchanged_version_reads_no_ids(people, acme_store, embed, monkeypatch):
    add(people, acme_store, embed, "file-a", b"Alpha apples.")
    found_files(people, acme_store, embed, "apples")
    scans = []
    real = vectors.catch_up
    monkeypatch.setattr(vectors, "catch_up", lambda *a, **k: scans.append(a) or real(*a, **k))
    found_files(people, acme_store, embed, "apples")
    assert scans == []
    add(people, acme_store, embed, "file-b", b"Beta bananas.")
    assert found_files(people, acme_store, embed, "bananas") >= {"file-b"}
    assert len(scans) == 1


def test_another_process_s_cache_catches_up_on_a_version_change(people, acme_store, embed):
    """A second IndexCache stands for another process: no one tells it of
    writes but the store's version."""
    other = IndexCache()
    add(people, acme_store, embed, "file-a", b"Alpha apples.")
    store = VectorStore.objects.get(id=acme_store.id)
    seen = other.synced(store.id, store.index_version, store.dimensions)
    assert len(seen) == 1
    add(people, acme_store, embed, "file-b", b"Beta bananas.")
    vector_store_file_delete(
        organisation_id=people["acme"].id, store_id=acme_store.id, file_id="file-a"
    )
    store.refresh_from_db()
    assert len(other.synced(store.id, store.index_version, store.dimensions)) == 1
    assert seen.search(np.asarray(embed.vector("bananas"), dtype=np.float32), 5)[0][1] > 0.5


def test_the_graph_finds_what_exact_search_finds():
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((20, 48)).astype(np.float32)
    data = vectors.normalised(
        centres[rng.integers(0, 20, 3000)] + 0.3 * rng.standard_normal((3000, 48))
    )
    exact, ann = StoreVectors(48), StoreVectors(48)
    for store in (exact, ann):
        store.apply(np.zeros(0, dtype=np.uint64), np.arange(1, 3001, dtype=np.uint64), data)
    ann.build(threads=0)
    hits = 0
    # Queries as the documents are: near one of the topics.
    queries = centres[rng.integers(0, 20, 50)] + 0.3 * rng.standard_normal((50, 48))
    for query in vectors.normalised(queries):
        want = {key for key, _ in exact.search(query, 10)}
        hits += len(want & {key for key, _ in ann.search(query, 10)})
    assert hits / 500 >= 0.95


def test_the_least_recently_searched_store_is_dropped_past_the_cap(settings):
    settings.SWITCHYARD_RETRIEVAL_INDEX_CACHE_VECTORS = 10
    cache = IndexCache()
    for name in ("vs_a", "vs_b"):
        cache.stores[name] = StoreVectors(4)
        cache.stores[name].apply(
            np.zeros(0, dtype=np.uint64),
            np.arange(1, 9, dtype=np.uint64),
            np.ones((8, 4), dtype=np.float32),
        )
    cache._evict("vs_b")
    assert list(cache.stores) == ["vs_b"]


@pytest.mark.parametrize("share", [0.05, 0.6])
def test_a_filtered_search_keeps_only_allowed_chunks(share):
    rng = np.random.default_rng(3)
    data = vectors.normalised(rng.standard_normal((2000, 16)))
    store = StoreVectors(16)
    store.apply(np.zeros(0, dtype=np.uint64), np.arange(1, 2001, dtype=np.uint64), data)
    store.build(threads=0)
    allowed = np.arange(1, int(2000 * share) + 1, dtype=np.uint64)
    found = store.search(data[0], 10, allowed)
    assert len(found) == 10 and all(key <= allowed[-1] for key, _ in found)


def test_a_larger_graph_is_searched_further(monkeypatch):
    monkeypatch.setattr(vectors, "EXPANSION_SEARCH_SIZE", 100)
    rng = np.random.default_rng(3)
    store = StoreVectors(16)
    data = vectors.normalised(rng.standard_normal((400, 16)))
    store.apply(np.zeros(0, dtype=np.uint64), np.arange(1, 101, dtype=np.uint64), data[:100])
    store.build(threads=0)
    assert store.ann.expansion_search == vectors.EXPANSION_SEARCH
    store.apply(np.zeros(0, dtype=np.uint64), np.arange(101, 401, dtype=np.uint64), data[100:])
    assert store.ann.expansion_search == vectors.search_expansion(400)
    assert vectors.EXPANSION_SEARCH < store.ann.expansion_search <= vectors.EXPANSION_SEARCH_MAX
    assert vectors.search_expansion(10**9) == vectors.EXPANSION_SEARCH_MAX
