"""The ``file_search`` tool on a database with pgvector: the search of the
response's tool call runs in PostgreSQL (the store's vectors checked into
its table, found by it), with the results the in-process index gives.

Skips on a database without pgvector, unless ``SWITCHYARD_TEST_PGVECTOR``
is ``required`` (``tests/retrieval/test_pgvector_server.py`` runs it so,
against a PostgreSQL with pgvector)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings
from openai import OpenAI

from tests.retrieval.pgvector_database import require_pgvector
from tests.tools.files import REFUNDS

pytestmark = pytest.mark.django_db(transaction=True)

ASK = '[[call:file_search {"query": "refunds paid"}]] [[answer:Two weeks [1].]]'


@pytest.fixture(autouse=True)
def _pgvector_database():
    require_pgvector()


def ask(client: OpenAI, store) -> list:
    response = client.responses.create(
        model="sim-model",
        input=ASK,
        tools=[{"type": "file_search", "vector_store_ids": [store.store_id]}],
        include=["file_search_call.results"],
    )
    searched = response.output[0]
    assert searched.type == "file_search_call" and searched.status == "completed"
    return [(r.file_id, r.text, round(r.score, 5)) for r in searched.results]


def test_the_tool_s_search_runs_in_postgresql_and_finds_what_the_process_finds(
    client: OpenAI, store
):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM responses_api_chunk_vector WHERE store_id = %s",
            [store.store_id],
        )
        assert cursor.fetchone()[0] == 2  # written by ingestion, one chunk per file
    with override_settings(SWITCHYARD_RETRIEVAL_VECTOR_BACKEND="pgvector"):
        in_database = ask(client, store)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT vectors FROM responses_api_chunk_vector_sync WHERE store_id = %s",
            [store.store_id],
        )
        assert cursor.fetchall() == [(2,)]  # checked by the search in PostgreSQL
    with override_settings(SWITCHYARD_RETRIEVAL_VECTOR_BACKEND="usearch"):
        in_process = ask(client, store)
    assert in_database[0][:2] == ("file-refunds", REFUNDS)
    assert in_database == in_process
