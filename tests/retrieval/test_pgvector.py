"""Vector stores searched in PostgreSQL with pgvector (``retrieval.pgvector``).

These run only on a database with pgvector: ``test_pgvector_server.py``
starts one (the PostgreSQL bundled with the ``pgserver`` wheel) and runs
them against it, with ``SWITCHYARD_TEST_PGVECTOR=required`` so that a
database without it fails them instead of skipping. On any other database
they skip, and so does the migration's pgvector part."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from django.db import connection
from django.test import override_settings

from responses_api.models import Chunk, VectorStore
from responses_api.retrieval import pgvector
from responses_api.retrieval.errors import NotFound
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.search import vector_store_search
from responses_api.retrieval.stores import (
    vector_store_create,
    vector_store_delete,
    vector_store_file_delete,
)
from tests.retrieval.pgvector_database import require_pgvector

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pgvector_database():
    require_pgvector()
    with override_settings(SWITCHYARD_RETRIEVAL_VECTOR_BACKEND="pgvector"):
        yield


class RandomEmbedder:
    """A vector per text drawn from a generator seeded by the text: every
    query has distinct similarities to every chunk, so the rankings of two
    search paths can be compared position by position."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions

    def vector(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
        return np.random.default_rng(seed).standard_normal(self.dimensions).tolist()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(text) for text in texts]


WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]


def fill(org: int, store_id: str, embed, files: int = 12, prefix: str = "file") -> None:
    for n in range(files):
        text = "\n\n".join(
            f"{WORDS[(n + k) % len(WORDS)]} policy {n} paragraph {k} " * 30 for k in range(3)
        )
        done = ingest_file(
            org,
            store_id,
            f"{prefix}-{n}",
            text.encode(),
            f"{prefix}-{n}.txt",
            embed,
            attributes={"group": n % 3, "name": f"{prefix}-{n}"},
            chunking_strategy={
                "type": "static",
                "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0},
            },
        )
        assert done.status == "completed", done.last_error


def rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def search(org: int, store_id: str, embed, backend: str = "pgvector", **options):
    pgvector.forget_detection()
    with override_settings(SWITCHYARD_RETRIEVAL_VECTOR_BACKEND=backend):
        page = vector_store_search(organisation_id=org, store_id=store_id, embed=embed, **options)
    return page["data"]


def same(first: list[dict], second: list[dict]) -> None:
    """The same results in the same order, scores equal to float32 rounding."""
    assert [(r["file_id"], r["content"]) for r in first] == [
        (r["file_id"], r["content"]) for r in second
    ]
    assert [r["score"] for r in first] == pytest.approx([r["score"] for r in second], abs=2e-6)


OPTIONS = [
    {"query": "delta policy paragraph", "max_num_results": 10},
    {"query": "golf hotel", "max_num_results": 20, "ranking_options": {"ranker": "none"}},
    {"query": "kilo", "max_num_results": 5, "filters": {"type": "eq", "key": "group", "value": 1}},
    {
        "query": "echo lima",
        "max_num_results": 8,
        "filters": {"type": "in", "key": "group", "value": [0, 2]},
        "ranking_options": {"ranker": "none", "score_threshold": 0.01},
    },
]


def test_ingestion_writes_each_chunk_s_vector_at_the_store_s_width(people):
    org = people["acme"].id
    store = vector_store_create(organisation_id=org)
    fill(org, store.id, RandomEmbedder(48), files=3)
    chunks = dict(Chunk.objects.filter(store_id=store.id).values_list("id", "embedding"))
    written = rows(
        "SELECT chunk_id, dimensions, embedding::text FROM responses_api_chunk_vector "
        "WHERE store_id = %s",
        [store.id],
    )
    assert chunks and {key for key, _, _ in written} == set(chunks)
    assert {width for _, width, _ in written} == {48}
    for key, _, text in written:
        stored = np.frombuffer(bytes(chunks[key]), dtype="<f4")
        assert np.array_equal(np.array(text.strip("[]").split(","), dtype="<f4"), stored)
    [(valid,)] = rows(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = 'chunk_vector_hnsw_48'",
        [],
    )
    assert valid


@pytest.mark.parametrize("options", OPTIONS)
def test_results_match_the_in_process_index(people, options):
    org = people["acme"].id
    store = vector_store_create(organisation_id=org)
    embed = RandomEmbedder(32)
    fill(org, store.id, embed)
    in_database = search(org, store.id, embed, **options)
    in_process = search(org, store.id, embed, backend="usearch", **options)
    assert in_database
    same(in_database, in_process)


def test_the_hnsw_index_answers_a_large_store_with_the_exact_results(people, monkeypatch):
    org = people["acme"].id
    store = vector_store_create(organisation_id=org)
    embed = RandomEmbedder(24)
    fill(org, store.id, embed)
    options = {"query": "bravo", "max_num_results": 10, "ranking_options": {"ranker": "none"}}
    exact = search(org, store.id, embed, **options)
    approximate_calls = []
    original = pgvector._approximate

    def spy(*args, **kwargs):
        found = original(*args, **kwargs)
        approximate_calls.append(found)
        return found

    monkeypatch.setattr(pgvector, "_approximate", spy)
    monkeypatch.setattr(pgvector, "ANN_MIN", 10)
    through_index = search(org, store.id, embed, **options)
    assert len(approximate_calls) == 1 and len(approximate_calls[0]) == 40
    same(through_index, exact)
    # The query's shape is one the index answers (on a table this small the
    # planner would rather scan it, hence no sequential scans here).
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    query = pgvector.vector_text(np.ones(24, dtype=np.float32))
    for filtered in (False, True):
        arguments = [query, query, 400, store.id, *([[1, 2]] if filtered else []), 40]
        plan = "\n".join(
            row[0] for row in rows("EXPLAIN " + pgvector.approximate_sql(24, filtered), arguments)
        )
        assert "Index Scan using chunk_vector_hnsw_24" in plan, plan


def test_a_store_with_a_small_share_of_its_width_falls_back_to_exact(people, monkeypatch):
    """The index's candidates are mostly another organisation's: too few of
    this store's remain, and it is searched exactly, never short of results."""
    acme, globex = people["acme"].id, people["globex"].id
    embed = RandomEmbedder(16)
    big = vector_store_create(organisation_id=globex)
    fill(globex, big.id, embed, files=40, prefix="theirs")
    small = vector_store_create(organisation_id=acme)
    fill(acme, small.id, embed, files=12)
    monkeypatch.setattr(pgvector, "MAX_CANDIDATES", 20)
    monkeypatch.setattr(pgvector, "ANN_MIN", 5)
    options = {"query": "india", "max_num_results": 15, "ranking_options": {"ranker": "none"}}
    found = search(acme, small.id, embed, **options)
    assert len(found) == 15 and all(r["file_id"].startswith("file-") for r in found)
    same(found, search(acme, small.id, embed, backend="usearch", **options))


def test_another_organisation_s_store_is_missing_and_its_vectors_never_returned(people):
    acme, globex = people["acme"].id, people["globex"].id
    embed = RandomEmbedder(16)
    ours = vector_store_create(organisation_id=acme)
    theirs = vector_store_create(organisation_id=globex)
    fill(acme, ours.id, embed, files=4, prefix="ours")
    fill(globex, theirs.id, embed, files=4, prefix="theirs")  # the same texts, other ids
    with pytest.raises(NotFound):
        search(acme, theirs.id, embed, query="alpha")
    found = search(acme, ours.id, embed, query="alpha policy", max_num_results=50)
    assert found and {r["file_id"] for r in found} == {f"ours-{n}" for n in range(4)}
    theirs_found = search(globex, theirs.id, embed, query="alpha policy", max_num_results=50)
    assert {r["file_id"] for r in theirs_found} == {f"theirs-{n}" for n in range(4)}


def test_chunks_written_without_vectors_are_filled_in_at_the_next_search(people):
    org = people["acme"].id
    store = vector_store_create(organisation_id=org)
    embed = RandomEmbedder(20)
    with override_settings(SWITCHYARD_RETRIEVAL_VECTOR_BACKEND="usearch"):
        fill(org, store.id, embed, files=5)
    count = "SELECT count(*) FROM responses_api_chunk_vector WHERE store_id = %s"
    assert rows(count, [store.id]) == [(0,)]
    options = {"query": "charlie", "max_num_results": 12}
    in_database = search(org, store.id, embed, **options)
    chunks = Chunk.objects.filter(store_id=store.id).count()
    assert rows(count, [store.id]) == [(chunks,)]
    version = VectorStore.objects.get(id=store.id).index_version
    assert rows(
        "SELECT index_version, vectors FROM responses_api_chunk_vector_sync WHERE store_id = %s",
        [store.id],
    ) == [(version, chunks)]
    same(in_database, search(org, store.id, embed, backend="usearch", **options))


def test_deleting_a_file_or_the_store_deletes_their_vectors(people):
    org = people["acme"].id
    store = vector_store_create(organisation_id=org)
    embed = RandomEmbedder(12)
    fill(org, store.id, embed, files=3)
    search(org, store.id, embed, query="alpha")
    vector_store_file_delete(organisation_id=org, store_id=store.id, file_id="file-0")
    found = search(org, store.id, embed, query="alpha", max_num_results=50)
    assert found and "file-0" not in {r["file_id"] for r in found}
    left = rows("SELECT count(*) FROM responses_api_chunk_vector WHERE store_id = %s", [store.id])
    assert left == [(Chunk.objects.filter(store_id=store.id).count(),)]
    vector_store_delete(organisation_id=org, store_id=store.id)
    for table in ("responses_api_chunk_vector", "responses_api_chunk_vector_sync"):
        assert rows(f"SELECT count(*) FROM {table} WHERE store_id = %s", [store.id]) == [(0,)]


def test_stores_of_other_widths_each_have_their_index_and_wider_ones_none(people):
    org = people["acme"].id
    stores = {}
    for width in (8, 40, pgvector.HNSW_MAX_DIMENSIONS + 48):
        stores[width] = vector_store_create(organisation_id=org)
        fill(org, stores[width].id, RandomEmbedder(width), files=2, prefix=f"w{width}")
    for width, store in stores.items():
        embed = RandomEmbedder(width)
        options = {"query": "alpha", "max_num_results": 6, "ranking_options": {"ranker": "none"}}
        found = search(org, store.id, embed, **options)
        assert found and all(r["file_id"].startswith(f"w{width}-") for r in found)
        same(found, search(org, store.id, embed, backend="usearch", **options))
    names = {
        name
        for (name,) in rows(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'responses_api_chunk_vector'", []
        )
    }
    assert {"chunk_vector_hnsw_8", "chunk_vector_hnsw_40"} <= names
    assert f"chunk_vector_hnsw_{pgvector.HNSW_MAX_DIMENSIONS + 48}" not in names


def test_with_the_usearch_backend_nothing_is_written_to_the_table(people):
    org = people["acme"].id
    store = vector_store_create(organisation_id=org)
    embed = RandomEmbedder(10)
    with override_settings(SWITCHYARD_RETRIEVAL_VECTOR_BACKEND="usearch"):
        fill(org, store.id, embed, files=2)
        assert not pgvector.in_use()
        assert search(org, store.id, embed, backend="usearch", query="alpha")
    for table in ("responses_api_chunk_vector", "responses_api_chunk_vector_sync"):
        assert rows(f"SELECT count(*) FROM {table} WHERE store_id = %s", [store.id]) == [(0,)]
