"""Vector stores: how files are read, and where their vectors are indexed."""

from __future__ import annotations

from config.declared.spec import UPSTREAM, Setting

TITLE = "Vector stores"

SETTINGS = (
    Setting(
        "SWITCHYARD_RETRIEVAL_MAX_TEXT_CHARS",
        "int",
        5_000_000,
        "The most text one file added to a vector store may yield, in characters; a file "
        "past it fails (invalid_file) instead of filling the store.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_RETRIEVAL_MAX_PDF_PAGES",
        "int",
        2000,
        "The most pages of a PDF added to a vector store; a longer one fails (invalid_file).",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_RETRIEVAL_PARSE_SECONDS",
        "float",
        120.0,
        "Seconds reading one file's text may take (a PDF page by page); past them the file "
        "fails (invalid_file).",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_RETRIEVAL_INDEX_CACHE_VECTORS",
        "int",
        2_000_000,
        "Vectors a process keeps in its in-memory vector indexes, all stores together; the "
        "least recently searched store's index is dropped past it (and rebuilt from the "
        "database at its next search).",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_RETRIEVAL_VECTOR_BACKEND",
        "str",
        "auto",
        "Where vector stores' vectors are searched: `pgvector` in PostgreSQL (an HNSW index "
        "per embedding width), `usearch` in each process's memory, or `auto`: pgvector when "
        "the database has the extension and `manage.py migrate` (or `pgvector_setup`) has "
        "created its tables (docs/reference/retrieval.md).",
        UPSTREAM,
        choices=("auto", "pgvector", "usearch"),
        case="lower",
    ),
    Setting(
        "SWITCHYARD_RETRIEVAL_INGEST_THREADS",
        "int",
        2,
        "Files a process embeds at once when it ingests them itself (the embedded default).",
        UPSTREAM,
    ),
)
