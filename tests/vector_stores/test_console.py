"""The console's Vector stores pages: the organisation's stores, a store's
files with their statuses, a search from the page; another organisation's
store is a 404 like a missing one."""

from __future__ import annotations

import pytest
from django.urls import reverse

from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.stores import vector_store_create
from responses_api.simulator.embeddings import vector_of
from tests.conftest import usage_rows
from tests.console.conftest import as_user, crew  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def simulated(texts):
    return [vector_of(text) for text in texts]


def test_the_pages_list_stores_show_files_and_search(
    as_user,  # noqa: F811
    embed_tenant,
    simulator,
    gateway,
):
    tenant = embed_tenant("acme", simulator.url)
    org = tenant.organisation.pk
    store = vector_store_create(organisation_id=org, name="Handbook")
    ingest_file(org, store.id, "file-a", b"Travel expenses are paid monthly.", "a.txt", simulated)
    ingest_file(org, store.id, "file-b", b'a,b\n1,"open\n', "b.csv", simulated)
    alice = as_user("alice")
    listing = alice.get(reverse("console:vector_stores")).content.decode()
    assert "Handbook" in listing and store.id in listing and "embed-model" in listing
    assert "Vector stores</a>" in listing  # in the navigation
    page = alice.get(reverse("console:vector_store", args=[store.id])).content.decode()
    assert "a.txt" in page and "completed" in page and "failed" in page
    found = alice.get(reverse("console:vector_store", args=[store.id]), {"q": "travel expenses"})
    assert found.status_code == 200
    text = found.content.decode()
    assert "Travel expenses are paid monthly." in text and "score" in text
    gateway.rows.write()
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.endpoint, row.status, row.api_key_id) == ("/embeddings", 200, None)


def test_another_organisation_s_store_is_a_404(as_user, people):  # noqa: F811
    store = vector_store_create(organisation_id=people["acme"].pk, name="Acme's")
    charlie = as_user("charlie")
    theirs = charlie.get(reverse("console:vector_store", args=[store.id]))
    missing = charlie.get(reverse("console:vector_store", args=["vs_" + "0" * 32]))
    assert theirs.status_code == missing.status_code == 404
    assert "Acme's" not in charlie.get(reverse("console:vector_stores")).content.decode()
