"""``pipeline.vector_search.search_stores``: one embedding per distinct
model, results of several stores merged by score, tenancy."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from responses_api.access.auth import organisation_caller
from responses_api.backends.client import close_clients
from responses_api.pipeline.vector_search import search_stores
from responses_api.retrieval.errors import InvalidParameter, NotFound
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.stores import vector_store_create
from responses_api.simulator.embeddings import vector_of
from tests.conftest import usage_rows

pytestmark = pytest.mark.django_db


def search(gateway, caller, **kwargs):
    async def run():
        try:
            return await search_stores(caller, **kwargs)
        finally:
            await close_clients()

    try:
        return async_to_sync(run)()
    finally:
        gateway.rows.write()


def simulated(texts):
    return [vector_of(text) for text in texts]


def test_stores_are_searched_with_one_embedding_and_merged(gateway, embed_tenant):
    tenant = embed_tenant()
    org = tenant.organisation.pk
    first = vector_store_create(organisation_id=org, name="one")
    second = vector_store_create(organisation_id=org, name="two")
    assert first.embedding_model == "embed-model"
    ingest_file(org, first.id, "file-a", b"The expense policy covers travel.", "a.txt", simulated)
    ingest_file(org, second.id, "file-b", b"Holidays are twenty days.", "b.txt", simulated)
    ingest_file(org, second.id, "file-c", b"Travel expense claims close.", "c.txt", simulated)
    caller = organisation_caller(org)
    page = search(gateway, caller, store_ids=[first.id, second.id], query="travel expense")
    assert page["object"] == "vector_store.search_results.page"
    assert [r["file_id"] for r in page["data"]][:2] in (["file-a", "file-c"], ["file-c", "file-a"])
    scores = [r["score"] for r in page["data"]]
    assert scores == sorted(scores, reverse=True)
    assert {"file_id", "filename", "score", "attributes", "content"} <= set(page["data"][0])
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.endpoint, row.status, row.model) == ("/embeddings", 200, "embed-model")


def test_another_organisations_store_is_missing_and_nothing_is_embedded(gateway, embed_tenant):
    acme = embed_tenant("acme")
    globex = embed_tenant("globex")
    theirs = vector_store_create(organisation_id=acme.organisation.pk)
    caller = organisation_caller(globex.organisation.pk)
    with pytest.raises(NotFound) as other:
        search(gateway, caller, store_ids=[theirs.id], query="x")
    with pytest.raises(NotFound) as missing:
        search(gateway, caller, store_ids=["vs_" + "0" * 32], query="x")
    assert other.value.message.replace(theirs.id, "") == missing.value.message.replace(
        "vs_" + "0" * 32, ""
    )
    with pytest.raises(InvalidParameter) as bad:
        search(gateway, caller, store_ids=[theirs.id], query="x", max_num_results=0)
    assert bad.value.param == "max_num_results"
    assert usage_rows() == []


def test_a_store_without_an_embedding_model_is_searched_by_keyword(gateway, people):
    org = people["acme"].pk
    store = vector_store_create(organisation_id=org)
    assert store.embedding_model == ""
    done = ingest_file(org, store.id, "file-k", b"Quarterly revenue grew.", "k.txt", None)
    assert done.status == "completed"
    page = search(gateway, organisation_caller(org), store_ids=[store.id], query="revenue")
    assert [r["file_id"] for r in page["data"]] == ["file-k"]
    assert usage_rows() == []
