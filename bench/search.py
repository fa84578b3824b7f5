"""Vector store ingestion and search at 1,000, 100,000 and (``--million``)
1,000,000 chunks: bench/README.md, "Vector store search".

    python bench/search.py [--million] [--database-url URL] [--queries N] [--write]

A generated corpus: files of about 100 chunks (static chunking, 100 tokens,
no overlap), their words drawn Zipf-wise from a 20,000-word vocabulary
plus the file's topic word, one of 1,000 topics; the embedder gives each
chunk its topic's centre plus noise, 384 dimensions (the width of the
small sentence-embedding models), so that vectors cluster as real ones
do. Each size is its own store, ingested with ``ingest_file`` (parsing,
chunking, sealing, hashing the terms, writing), then searched with
``vector_store_search`` (hybrid: keyword index and vector index, fused,
the results' texts decrypted) by queries made like the chunks. Recall@10
compares the graph's top 10 with exact search over the same vectors.
Runs on ``--database-url`` (default: DATABASE_URL, else a SQLite file in
bench/.data/)."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DIMENSIONS = 384
TOPICS = 1000
VOCABULARY = 20_000
CHUNKS_PER_FILE = 100
WORDS_PER_CHUNK = 60
TOPIC_WORD = re.compile(r"\btopic(\d+)\b")
STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}


def setup(database_url: str | None) -> None:
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        data = ROOT / "bench" / ".data"
        data.mkdir(parents=True, exist_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{data / 'search.sqlite3'}"
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class Corpus:
    def __init__(self, seed: int = 1) -> None:
        import numpy as np

        self.np = np
        self.rng = np.random.default_rng(seed)
        self.centres = self.rng.standard_normal((TOPICS, DIMENSIONS)).astype(np.float32)
        weights = 1.0 / np.arange(1, VOCABULARY + 1)
        self.weights = weights / weights.sum()
        self.tail = weights[100:] / weights[100:].sum()
        self.words = [f"w{i}" for i in range(VOCABULARY)]

    def file_text(self, topic: int) -> bytes:
        picks = self.rng.choice(VOCABULARY, CHUNKS_PER_FILE * WORDS_PER_CHUNK, p=self.weights)
        words = [self.words[i] for i in picks]
        for i in range(0, len(words), 7):
            words[i] = f"topic{topic}"
        return " ".join(words).encode()

    def vector(self, text: str) -> list[float]:
        found = TOPIC_WORD.search(text)
        topic = int(found.group(1)) if found else 0
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
        noise = self.np.random.default_rng(seed).standard_normal(DIMENSIONS)
        return (self.centres[topic] + 0.6 * noise).tolist()

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(text) for text in texts]

    def query(self, topics: int = TOPICS) -> str:
        """A topic the store has and three words below the 100 commonest
        (which, as stop words would be, are in most chunks). A topic it
        lacks would have no true neighbours: every chunk at about the same
        distance, which no index can be expected to rank as exact search."""
        topic = int(self.rng.integers(0, topics))
        picks = self.rng.choice(VOCABULARY - 100, 3, p=self.tail) + 100
        return " ".join([f"topic{topic}", *(self.words[i] for i in picks)])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run_size(organisation_id: int, chunks: int, corpus: Corpus, queries: int) -> dict[str, float]:
    import numpy as np
    from django.db import connection

    from responses_api.models import Chunk, VectorStore
    from responses_api.retrieval.ingest import ingest_file
    from responses_api.retrieval.search import vector_store_search
    from responses_api.retrieval.stores import vector_store_create
    from responses_api.retrieval.vectors import indexes

    store = vector_store_create(organisation_id=organisation_id, name=f"bench {chunks}")
    files = max(1, chunks // CHUNKS_PER_FILE)
    started = time.perf_counter()
    n = 0
    while n < files:
        done = ingest_file(
            organisation_id,
            store.id,
            f"file-{n}",
            corpus.file_text(n % TOPICS),
            f"doc-{n}.txt",
            corpus.embed,
            chunking_strategy=STATIC,
        )
        if done.status != "completed":
            raise SystemExit(f"ingestion failed: {done.last_error}")
        if n == 0:  # the token estimate decides a file's chunks: aim at the size
            files = max(1, round(chunks / done.chunks.count()))
        if n and n % 500 == 0:
            print(f"  {n}/{files} files", flush=True)
        n += 1
    ingest_seconds = time.perf_counter() - started
    stored = Chunk.objects.filter(store_id=store.id).count()
    topics = min(files, TOPICS)
    if connection.vendor == "postgresql":
        # As autovacuum would after such a load (and after the deletions of
        # an earlier run, whose dead index entries a search would step over).
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE responses_api_chunk")
            cursor.execute("VACUUM ANALYZE responses_api_chunk_terms")

    store = VectorStore.objects.get(id=store.id)
    indexes.background = False  # the graph is built here, on both cores, and timed
    started = time.perf_counter()
    cached = indexes.synced(store.id, store.index_version, store.dimensions)
    index_seconds = time.perf_counter() - started

    latencies = []
    for _ in range(queries):
        text = corpus.query(topics)
        began = time.perf_counter()
        page = vector_store_search(
            organisation_id=organisation_id,
            store_id=store.id,
            query=text,
            embed=corpus.embed,
            max_num_results=10,
        )
        latencies.append((time.perf_counter() - began) * 1000)
        assert page["data"], text

    hits = total = 0
    alone = []
    for _ in range(queries):
        vector = np.asarray(corpus.vector(corpus.query(topics)), dtype=np.float32)
        vector /= np.linalg.norm(vector)
        began = time.perf_counter()
        found = {key for key, _ in cached.search(vector, 10)}
        alone.append((time.perf_counter() - began) * 1000)
        if cached.ann is not None and total < 2000:
            exact = {key for key, _ in cached._exact(vector, 10, cached.keys, cached.matrix)}
            hits, total = hits + len(exact & found), total + 10
    return {
        "chunks": stored,
        "ingest_per_s": stored / ingest_seconds,
        "ingest_s": ingest_seconds,
        "index_s": index_seconds,
        "p50": statistics.median(latencies),
        "p99": percentile(latencies, 0.99),
        "recall": hits / total if total else 1.0,
        "vector_p50": statistics.median(alone),
        "vector_p99": percentile(alone, 0.99),
        "ann": cached.ann is not None,
        "store": store.id,
    }


def table(rows: list[dict[str, float]], vendor: str) -> str:
    lines = [
        "| chunks | ingestion (chunks/s) | index load + build (s) | search p50 / p99 (ms) | "
        "vector index alone p50 / p99 (ms) | vector index | recall@10 vs exact |",
        "|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        kind = "HNSW (usearch, f16) + exact re-rank" if r["ann"] else "exact"
        lines.append(
            f"| {r['chunks']:,} | {r['ingest_per_s']:,.0f} | {r['index_s']:.1f} | "
            f"{r['p50']:.1f} / {r['p99']:.1f} | {r['vector_p50']:.2f} / {r['vector_p99']:.2f} | "
            f"{kind} | {r['recall']:.3f} |"
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join(lines) + f"\n\n(database: {vendor}; load average at the end: {load})\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--million", action="store_true", help="also 1,000,000 chunks")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    parser.add_argument(
        "--organisation", default="search-bench", help="the slug of the organisation it uses"
    )
    args = parser.parse_args()
    setup(args.database_url)
    from django.db import connection

    from accounts.services.organisations import organisation_ensure
    from responses_api.retrieval.stores import vector_store_delete, vector_store_list

    organisation, _ = organisation_ensure(slug=args.organisation, name="Search bench")
    for left in vector_store_list(organisation_id=organisation.id):  # of an interrupted run
        vector_store_delete(organisation_id=organisation.id, store_id=left.id)
    sizes = [int(s) for s in args.sizes.split(",")] + ([1_000_000] if args.million else [])
    corpus = Corpus()
    rows = []
    for size in sizes:
        print(f"{size:,} chunks", flush=True)
        row = run_size(organisation.id, size, corpus, args.queries)
        print(row, flush=True)
        rows.append(row)
        if not args.keep:
            vector_store_delete(organisation_id=organisation.id, store_id=str(row["store"]))
    print(table(rows, connection.vendor))


if __name__ == "__main__":
    main()
