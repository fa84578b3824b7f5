"""The retrieval engine under vector stores and ``file_search``: reading a
file's text (``parsing``, ``pdf``), cutting it into chunks (``chunking``),
ingesting it (``ingest``), and hybrid search (``search``) over a keyword
index in the database (``keyword``) and a vector index in memory
(``vectors``). docs/reference/retrieval.md says why it is built so."""
