"""The keyword index: its bound on the matches ranked, and (PostgreSQL) the
narrow table of terms kept by triggers on the chunks."""

from __future__ import annotations

import pytest
from django.db import connection

from responses_api.models import Chunk
from responses_api.retrieval import keyword
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.search import vector_store_search
from responses_api.retrieval.stores import vector_store_delete, vector_store_file_delete
from responses_api.retrieval.terms import index_terms, query_terms


def _add(org, store, file_id, text, embed=None):
    done = ingest_file(org, store.id, file_id, text.encode(), f"{file_id}.txt", embed)
    assert done.status == "completed", done.last_error


def _found(org, store, query):
    page = vector_store_search(organisation_id=org, store_id=store.id, query=query)
    return [r["file_id"] for r in page["data"]]


def test_a_rare_word_s_chunks_are_ranked_however_common_the_other_words(
    people, acme_store, monkeypatch
):
    org = people["acme"].id
    for n in range(12):
        _add(org, acme_store, f"file-common-{n}", "quarterly report figures and notes")
    _add(org, acme_store, "file-rare", "quarterly report about the zeppelin hangar")
    # Each term brings at most 2 matches: the common words' first chunks
    # are not the one the rare word is in.
    monkeypatch.setattr(keyword, "MAX_RANKED", 6)
    monkeypatch.setattr(keyword, "MIN_PER_TERM", 1)
    assert _found(org, acme_store, "quarterly report zeppelin")[0] == "file-rare"


def test_a_filter_keeps_the_keyword_matches_to_its_files(people, acme_store):
    org = people["acme"].id
    _add(org, acme_store, "file-a", "the lighthouse keeper's log")
    _add(org, acme_store, "file-b", "a lighthouse on the northern cape")
    files = {f: pk for f, pk in Chunk.objects.values_list("file__file_id", "file_id")}
    terms = query_terms(org, "lighthouse")
    everything = keyword.keyword_search(acme_store.id, terms, 10)
    only_b = keyword.keyword_search(acme_store.id, terms, 10, [files["file-b"]])
    assert len(everything) == 2
    assert [key for key, _ in only_b] == list(
        Chunk.objects.filter(file_id=files["file-b"]).values_list("id", flat=True)
    )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the table is PostgreSQL's")
def test_the_terms_table_follows_the_chunks(people, acme_store):
    org = people["acme"].id
    _add(org, acme_store, "file-a", "ferry timetable for the winter")
    _add(org, acme_store, "file-b", "ferry tickets and fares")

    def indexed():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT chunk_id FROM responses_api_chunk_terms WHERE store_id = %s "
                "ORDER BY chunk_id",
                [acme_store.id],
            )
            return [row[0] for row in cursor.fetchall()]

    chunks = Chunk.objects.filter(store_id=acme_store.id)
    assert indexed() == sorted(chunks.values_list("id", flat=True))
    vector_store_file_delete(organisation_id=org, store_id=acme_store.id, file_id="file-a")
    assert indexed() == sorted(chunks.values_list("id", flat=True))
    assert _found(org, acme_store, "timetable") == []

    chunks.update(terms=index_terms(org, "hovercraft"))
    assert _found(org, acme_store, "hovercraft") == ["file-b"]
    assert _found(org, acme_store, "ferry") == []

    vector_store_delete(organisation_id=org, store_id=acme_store.id)
    assert indexed() == []
