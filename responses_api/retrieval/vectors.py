"""The vectors of each store, in memory, per process: exact search under
``ann_min`` vectors, an HNSW graph (usearch) above, both rebuilt from the
database and kept in step with it.

Every write to a store's chunks raises ``VectorStore.index_version`` in
its transaction. A search reads the store's row first (it must, for
tenancy), and when the version differs from the one its cache was synced
at, it first catches up: the ids of the store's chunks are read (ids only),
the vectors of new ones loaded, the gone ones dropped. So every process
(web processes, Celery workers) stays right without talking to the others,
and a write costs the others one id scan at their next search, not a
rebuild. The version is read before the ids, so a write that lands between
the two is caught by the next search.

The graph is built in a thread of its own once a store passes ``ann_min``
vectors; searches meanwhile stay exact. Its candidates are re-ranked with
the exact vectors (kept for that and for filtered searches), so the scores
are exact cosine similarities and the graph may be quantised (float16).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.conf import settings

log = logging.getLogger(__name__)

ANN_MIN = 20_000
# The graph's parameters, measured by bench/search.py (recall@10 against
# exact; bench/README.md, "Vector store search"). A wider expansion at
# build time gives a graph that clustered vectors (many near-equidistant
# neighbours) can be searched well with a narrow expansion at query time.
CONNECTIVITY = 16
EXPANSION_ADD = 96
EXPANSION_SEARCH = 128
# Up to this many vectors the graph is searched with EXPANSION_SEARCH, past
# it with more (``search_expansion``), up to EXPANSION_SEARCH_MAX.
EXPANSION_SEARCH_SIZE = 100_000
EXPANSION_SEARCH_MAX = 1024
ANN_DTYPE = "f16"
# A filtered search keeping at most this share of a store's vectors scans
# them exactly; a wider one asks the graph for more and filters.
FILTER_EXACT_SHARE = 0.2


def search_expansion(size: int) -> int:
    """How far a graph of ``size`` vectors is searched. The expansion that
    finds a query's true neighbours at 100,000 vectors misses many at
    1,000,000: in a store of clustered vectors a query's neighbourhood holds
    ten times as many near-equidistant ones, and the search must walk
    through more of them to reach the nearest. So it grows with the store
    (in proportion: bench/README.md, "Vector store search", has recall and
    latency by expansion), and stays as it was for the sizes it was chosen
    for."""
    if size <= EXPANSION_SEARCH_SIZE:
        return EXPANSION_SEARCH
    return min(EXPANSION_SEARCH_MAX, round(EXPANSION_SEARCH * size / EXPANSION_SEARCH_SIZE))


def as_matrix(blobs: Sequence[bytes], dimensions: int) -> np.ndarray:
    """Stored embeddings (float32 bytes) as unit rows."""
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dimensions)
    return normalised(matrix)


def normalised(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


class StoreVectors:
    """One store's vectors: ``keys`` (chunk ids, ascending) and ``matrix``
    (their unit vectors, row for row), and the graph once built."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.keys = np.zeros(0, dtype=np.uint64)
        self.matrix = np.zeros((0, dimensions), dtype=np.float32)
        self.version: int | None = None
        self.ann: Any = None
        self.ann_keys = np.zeros(0, dtype=np.uint64)
        self.building = False
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return len(self.keys)

    def apply(self, removed: np.ndarray, added: np.ndarray, vectors: np.ndarray) -> None:
        """Drop the ``removed`` keys, add ``added`` with their unit ``vectors``."""
        with self.lock:
            if len(removed):
                keep = ~np.isin(self.keys, removed)
                self.keys, self.matrix = self.keys[keep], self.matrix[keep]
            if len(added):
                keys = np.concatenate([self.keys, added.astype(np.uint64)])
                matrix = np.concatenate([self.matrix, vectors])
                if len(self.keys) and added.min() < self.keys[-1]:
                    order = np.argsort(keys, kind="stable")
                    keys, matrix = keys[order], matrix[order]
                self.keys, self.matrix = keys, matrix
            if self.ann is not None:
                self._reconcile(self.ann)

    def _reconcile(self, ann: Any) -> None:
        """Bring the graph to the keys of the matrix (it lags after a
        background build, or after writes applied to the matrix)."""
        extra = np.setdiff1d(self.ann_keys, self.keys, assume_unique=True)
        missing = np.setdiff1d(self.keys, self.ann_keys, assume_unique=True)
        if len(extra):
            ann.remove(extra)
        if len(missing):
            rows = np.searchsorted(self.keys, missing)
            ann.add(missing, self.matrix[rows], threads=1)
        self.ann_keys = self.keys.copy()
        ann.expansion_search = search_expansion(len(self.ann_keys))

    def build(self, threads: int = 1) -> None:
        """Build the graph from a snapshot, then catch up with what changed."""
        from usearch.index import Index

        with self.lock:
            keys, matrix = self.keys, self.matrix
        ann = Index(
            ndim=self.dimensions,
            metric="cos",
            dtype=ANN_DTYPE,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        if len(keys):
            ann.add(keys, matrix, threads=threads)
        with self.lock:
            self.ann_keys = keys
            self._reconcile(ann)
            self.ann, self.building = ann, False

    def search(
        self, query: np.ndarray, limit: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` nearest chunks (id, cosine similarity), best first;
        ``allowed``: only these chunk ids."""
        with self.lock:
            keys, matrix, ann = self.keys, self.matrix, self.ann
        if not len(keys):
            return []
        rows: np.ndarray | None = None
        if allowed is not None:
            rows = np.flatnonzero(np.isin(keys, allowed))
            if len(rows) <= FILTER_EXACT_SHARE * len(keys) or ann is None:
                return self._exact(query, limit, keys[rows], matrix[rows])
        if ann is None:
            return self._exact(query, limit, keys, matrix)
        wanted = max(limit * 10, 100) if rows is None else max(limit * 20, 200)
        with self.lock:  # a graph is not searched while it changes
            found = ann.search(query, min(wanted, len(keys)))
        candidates = np.asarray(found.keys, dtype=np.uint64)
        # ``keys`` is sorted: a binary search per candidate, not a pass over
        # the whole store as ``np.isin`` would make.
        positions = np.searchsorted(keys, candidates).clip(0, len(keys) - 1)
        present = keys[positions] == candidates
        candidates, positions = candidates[present], positions[present]
        if allowed is not None:
            kept = np.isin(candidates, allowed)
            candidates, positions = candidates[kept], positions[kept]
            if len(candidates) < limit:
                return self._exact(query, limit, keys[rows], matrix[rows])
        return self._exact(query, limit, candidates, matrix[positions])

    @staticmethod
    def _exact(
        query: np.ndarray, limit: int, keys: np.ndarray, matrix: np.ndarray
    ) -> list[tuple[int, float]]:
        if not len(keys):
            return []
        scores = matrix @ query
        if len(scores) > limit:
            top = np.argpartition(-scores, limit - 1)[:limit]
        else:
            top = np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(keys[i]), float(scores[i])) for i in top]


class IndexCache:
    """The process's ``StoreVectors``, least recently searched dropped first
    past ``SWITCHYARD_RETRIEVAL_INDEX_CACHE_VECTORS``."""

    def __init__(self) -> None:
        self.stores: OrderedDict[str, StoreVectors] = OrderedDict()
        self.lock = threading.Lock()
        self.ann_min = ANN_MIN
        # False in tests and the benchmark: the graph is built in the search.
        self.background = True

    def forget(self, store_id: str) -> None:
        with self.lock:
            self.stores.pop(store_id, None)

    def synced(self, store_id: str, version: int, dimensions: int) -> StoreVectors:
        """The store's vectors as of ``version`` (or later)."""
        with self.lock:
            vectors = self.stores.get(store_id)
            if vectors is None or vectors.dimensions != dimensions:
                vectors = self.stores[store_id] = StoreVectors(dimensions)
            self.stores.move_to_end(store_id)
        with vectors.lock:
            if vectors.version != version:
                catch_up(store_id, vectors)
                vectors.version = version
            start = vectors.ann is None and not vectors.building and len(vectors) >= self.ann_min
            if start:
                vectors.building = True
        if start and self.background:
            threading.Thread(target=self._build, args=(vectors,), daemon=True).start()
        elif start:
            vectors.build(threads=0)
        self._evict(store_id)
        return vectors

    @staticmethod
    def _build(vectors: StoreVectors) -> None:
        try:
            vectors.build()
        except Exception:
            # The searches stay exact; the next sync tries again.
            log.exception("Building a vector index failed")
            vectors.building = False

    def _evict(self, keep: str) -> None:
        cap = settings.SWITCHYARD_RETRIEVAL_INDEX_CACHE_VECTORS
        with self.lock:
            while sum(len(v) for v in self.stores.values()) > cap and len(self.stores) > 1:
                oldest = next(iter(self.stores))
                if oldest == keep:
                    self.stores.move_to_end(keep)
                    oldest = next(iter(self.stores))
                del self.stores[oldest]


def catch_up(store_id: str, vectors: StoreVectors, batch: int = 5000) -> None:
    """Load what the database has and the cache lacks; drop what it lost."""
    from responses_api.models import Chunk

    chunks = Chunk.objects.filter(store_id=store_id)
    ids = np.fromiter(chunks.values_list("id", flat=True).iterator(10_000), dtype=np.uint64)
    ids.sort()
    removed = np.setdiff1d(vectors.keys, ids, assume_unique=True)
    added = np.setdiff1d(ids, vectors.keys, assume_unique=True)
    vectors.apply(removed, np.zeros(0, dtype=np.uint64), vectors.matrix[:0])
    for start in range(0, len(added), batch):
        wanted = [int(key) for key in added[start : start + batch]]
        rows = chunks.filter(id__in=wanted).order_by("id").values_list("id", "embedding")
        loaded = [(key, bytes(blob)) for key, blob in rows]
        if not loaded:
            continue
        keys = np.array([key for key, _ in loaded], dtype=np.uint64)
        matrix = as_matrix([blob for _, blob in loaded], vectors.dimensions)
        vectors.apply(np.zeros(0, dtype=np.uint64), keys, matrix)


indexes = IndexCache()
