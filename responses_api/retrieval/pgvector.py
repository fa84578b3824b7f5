"""The stores' vectors in PostgreSQL with pgvector, when the database has
it (migration 0022), instead of the process's own index (``vectors``).

``SWITCHYARD_RETRIEVAL_VECTOR_BACKEND`` chooses: ``usearch`` always
searches in the process; ``auto`` (the default) uses pgvector when the
extension and the migration's tables are there; ``pgvector`` asks for it,
and logs an error (once per process) and searches in the process when it is
missing, so that a search still answers. Whether the database has it is
asked once per process and database; installing the extension later takes
``manage.py pgvector_setup`` and a restart.

``responses_api_chunk_vector`` holds the vectors, in a ``vector`` column of
no fixed width: stores embed with models of different widths. HNSW indexes
only take vectors of one width, so there is one partial index per width,
on the column cast to it (``WHERE dimensions = N``), created when a width
is first written. pgvector indexes at most 2,000 dimensions: wider stores
are searched exactly. A store is searched like the in-process index does:

- **exactly** below ``ANN_MIN`` vectors (the store's rows by their btree
  index, distances computed in PostgreSQL): exact, and fast at that size;
- **through the HNSW index** above: the width's nearest candidates, all
  stores together, then the store's (and the filter's) among them, as the
  in-process graph is asked for more candidates and filtered. When fewer
  remain than were asked for (a store or filter holding a small share of
  that width's vectors), the store is searched exactly instead.

Scores are exact cosine similarities either way (the vectors are float32;
pgvector computes the distance on them), so both paths, and the in-process
one, rank and score alike.

Ingestion writes a file's vectors in the transaction of its chunks. Rows
written without them (by a process that searched in the process, or before
the extension was installed) are filled in at a store's next search: the
table records per store the ``index_version`` it was last checked against,
and a store whose version moved is checked for chunks lacking a vector,
like the in-process index catches up. Deleted chunks and stores take their
rows with them (triggers).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

TABLE = "responses_api_chunk_vector"
SYNC_TABLE = "responses_api_chunk_vector_sync"
# pgvector's limit for an HNSW index of ``vector``.
HNSW_MAX_DIMENSIONS = 2000
# pgvector's limit for ``hnsw.ef_search``: the most candidates one index scan gives.
MAX_CANDIDATES = 1000
WRITE_BATCH = 1000
FILL_BATCH = 5000

_known: dict[tuple[str, str, str, str], bool] = {}
_indexed: set[tuple[tuple[str, str, str, str], int]] = set()
_warned: set[tuple[str, str, str, str]] = set()
_lock = threading.Lock()
# A store this large is searched through the HNSW index, as in the process
# (``vectors.ANN_MIN``, not imported: that module loads numpy at once).
ANN_MIN = 20_000


def _database() -> tuple[str, str, str, str]:
    conf = connection.settings_dict
    return (connection.alias, str(conf["NAME"]), str(conf.get("HOST")), str(conf.get("PORT")))


def installed() -> bool:
    """Whether the database has the extension and the migration's tables,
    asked once per process and database."""
    if connection.vendor != "postgresql":
        return False
    key = _database()
    with _lock:
        known = _known.get(key)
    if known is None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL "
                "AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
                [TABLE, SYNC_TABLE],
            )
            known = bool(cursor.fetchone()[0])
        with _lock:
            _known[key] = known
    return known


def forget_detection() -> None:
    """Ask the database again at the next use (after ``pgvector_setup``)."""
    with _lock:
        _known.clear()
        _indexed.clear()


def in_use() -> bool:
    """Whether the stores' vectors are written to and searched in PostgreSQL."""
    choice = settings.SWITCHYARD_RETRIEVAL_VECTOR_BACKEND
    if choice == "usearch":
        return False
    found = installed()
    if choice == "pgvector" and not found:
        key = _database()
        if key not in _warned:
            _warned.add(key)
            log.error(
                "SWITCHYARD_RETRIEVAL_VECTOR_BACKEND is pgvector but the database has no "
                "pgvector (or has not run manage.py pgvector_setup): vectors are searched "
                "in the process."
            )
    return found


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form; each float32 is written so that it reads back
    as the same float32."""
    return "[" + ",".join(map(repr, vector.astype("float32").tolist())) + "]"


def index_ensure(dimensions: int) -> None:
    """The HNSW index of vectors of this width, created when missing: at
    once when in a transaction (tests), otherwise ``CONCURRENTLY``, which
    does not stop other writes (it waits for the transactions open on the
    table, and so delays the ingestion that asked, once per width). Another
    process building it already is left to. A failure is logged: the index
    serves speed only, and searches stay exact without it."""
    if dimensions > HNSW_MAX_DIMENSIONS or _indexed_width(dimensions):
        return
    name = f"chunk_vector_hnsw_{dimensions}"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p "
            "JOIN pg_class c ON c.oid = p.index_relid WHERE c.relname = %s)",
            [name],
        )
        if cursor.fetchone()[0]:
            return
    create = (
        f"INDEX {{}} IF NOT EXISTS {name} ON {TABLE} USING hnsw "
        f"((embedding::vector({dimensions})) vector_cosine_ops) WHERE dimensions = {dimensions}"
    )
    try:
        if connection.in_atomic_block:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("CREATE " + create.format(""))
        else:
            with connection.cursor() as cursor:
                # A concurrent build that failed leaves an invalid index behind.
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                cursor.execute("CREATE " + create.format("CONCURRENTLY"))
            _indexed.add((_database(), dimensions))
    except DatabaseError:
        log.exception("Creating the vector index of width %s failed", dimensions)


def _indexed_width(dimensions: int) -> bool:
    """Whether the width has a valid HNSW index; remembered once seen
    outside a transaction (one inside may yet be rolled back)."""
    if dimensions > HNSW_MAX_DIMENSIONS:
        return False
    key = (_database(), dimensions)
    if key in _indexed:
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [f"chunk_vector_hnsw_{dimensions}"],
        )
        row = cursor.fetchone()
    valid = bool(row and row[0])
    if valid and not connection.in_atomic_block:
        _indexed.add(key)
    return valid


def vectors_write(store_id: str, rows: Sequence[tuple[int, int, np.ndarray]]) -> None:
    """Write (chunk id, file pk, vector) rows of one store; a chunk written
    already keeps its row."""
    for start in range(0, len(rows), WRITE_BATCH):
        batch = rows[start : start + WRITE_BATCH]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {TABLE} (chunk_id, store_id, file_id, dimensions, embedding) "
                "SELECT k, %s, f, vector_dims(v), v "
                "FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) AS u(k, f, e), "
                "LATERAL (SELECT e::vector AS v) parsed "
                "ON CONFLICT (chunk_id) DO NOTHING",
                [
                    store_id,
                    [int(key) for key, _, _ in batch],
                    [int(file) for _, file, _ in batch],
                    [vector_text(vector) for _, _, vector in batch],
                ],
            )


def synced(store: Any) -> int:
    """Fill in the vectors of the store's chunks that have none, when its
    ``index_version`` moved since the last check; the store's vectors."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT index_version, vectors FROM {SYNC_TABLE} WHERE store_id = %s", [store.id]
        )
        row = cursor.fetchone()
    if row is not None and row[0] == store.index_version:
        return int(row[1])
    _fill(store)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE} WHERE store_id = %s", [store.id])
        count = int(cursor.fetchone()[0])
        cursor.execute(
            f"INSERT INTO {SYNC_TABLE} (store_id, index_version, vectors) VALUES (%s, %s, %s) "
            "ON CONFLICT (store_id) DO UPDATE SET index_version = EXCLUDED.index_version, "
            f"vectors = EXCLUDED.vectors WHERE {SYNC_TABLE}.index_version <= "
            "EXCLUDED.index_version",
            [store.id, store.index_version, count],
        )
    return count


def _fill(store: Any) -> None:
    import numpy as np

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id FROM responses_api_chunk c WHERE c.store_id = %s "
            "AND octet_length(c.embedding) > 0 AND NOT EXISTS "
            f"(SELECT 1 FROM {TABLE} v WHERE v.chunk_id = c.id) ORDER BY c.id",
            [store.id],
        )
        missing = [int(key) for (key,) in cursor.fetchall()]
    if missing and store.dimensions:
        index_ensure(store.dimensions)
    for start in range(0, len(missing), FILL_BATCH):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, file_id, embedding FROM responses_api_chunk "
                "WHERE store_id = %s AND id = ANY(%s) ORDER BY id",
                [store.id, missing[start : start + FILL_BATCH]],
            )
            rows = [
                (key, file, np.frombuffer(bytes(blob), dtype="<f4"))
                for key, file, blob in cursor.fetchall()
            ]
        vectors_write(store.id, [row for row in rows if len(row[2]) == store.dimensions])


def nearest(
    store: Any, query: np.ndarray, limit: int, allowed: Sequence[int] | None = None
) -> list[tuple[int, float]]:
    """The ``limit`` chunks (id, cosine similarity) nearest ``query``, best
    first; ``allowed``: only the chunks of these files (pks)."""
    count = synced(store)
    if not count:
        return []
    text = vector_text(query)
    dimensions = int(store.dimensions)
    if count >= ANN_MIN and _indexed_width(dimensions):
        found = _approximate(store.id, text, dimensions, limit, allowed)
        if len(found) >= (min(limit, count) if allowed is None else limit):
            return found
    return _exact(store.id, text, limit, allowed)


def approximate_sql(dimensions: int, filtered: bool) -> str:
    """The query of :func:`_approximate`; parameters: the query vector
    (twice), the candidates, the store, the files when ``filtered``, the
    limit. The width is written into it, not bound: the planner must see it
    to match the partial index's predicate."""
    cast = f"vector({int(dimensions)})"
    files = " AND file_id = ANY(%s)" if filtered else ""
    return (
        "SELECT chunk_id, 1 - distance FROM ("
        f"SELECT chunk_id, store_id, file_id, embedding::{cast} <=> %s::{cast} AS distance "
        f"FROM {TABLE} WHERE dimensions = {int(dimensions)} "
        f"ORDER BY embedding::{cast} <=> %s::{cast} LIMIT %s) candidates "
        f"WHERE store_id = %s{files} ORDER BY distance, chunk_id LIMIT %s"
    )


def _approximate(
    store_id: str, text: str, dimensions: int, limit: int, allowed: Sequence[int] | None
) -> list[tuple[int, float]]:
    """The width's nearest candidates through its HNSW index (the inner
    query orders by the indexed expression, so it is the index that answers),
    then the store's among them, scored exactly."""
    wanted = max(limit * 10, 100) if allowed is None else max(limit * 20, 200)
    candidates = min(wanted, MAX_CANDIDATES)
    arguments: list[Any] = [text, text, candidates, store_id]
    if allowed is not None:
        arguments.append(list(allowed))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL hnsw.ef_search = {candidates}")
        cursor.execute(approximate_sql(dimensions, allowed is not None), [*arguments, limit])
        return [(int(key), float(score)) for key, score in cursor.fetchall()]


def _exact(
    store_id: str, text: str, limit: int, allowed: Sequence[int] | None
) -> list[tuple[int, float]]:
    """Every vector of the store (or of the files), distances computed; a
    zero vector's undefined distance counts as orthogonal, as in the process."""
    files = " AND file_id = ANY(%s)" if allowed is not None else ""
    sql = (
        "SELECT chunk_id, 1 - distance FROM (SELECT chunk_id, "
        "coalesce(nullif(embedding <=> %s::vector, 'NaN'), 1) AS distance "
        f"FROM {TABLE} WHERE store_id = %s{files}) scored ORDER BY distance, chunk_id LIMIT %s"
    )
    arguments: list[Any] = [text, store_id]
    if allowed is not None:
        arguments.append(list(allowed))
    with connection.cursor() as cursor:
        cursor.execute(sql, [*arguments, limit])
        return [(int(key), float(score)) for key, score in cursor.fetchall()]
