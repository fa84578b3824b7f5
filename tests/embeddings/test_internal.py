"""``pipeline.embedding.embed_for_organisation``: the entry point the
gateway's own features (vector stores) embed through. Each call is one
request of its caller's, with exactly one usage row, whatever happens."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from responses_api.access.auth import organisation_caller
from responses_api.backends.client import close_clients
from responses_api.pipeline.embedding import embed_for_organisation
from responses_api.protocol.errors import ApiError
from responses_api.simulator.embeddings import vector_of
from tests.conftest import usage_rows

pytestmark = pytest.mark.django_db


def embed(gateway, caller, **kwargs):
    """Run the call on a loop of its own, as a worker would, then write its row."""

    async def run():
        try:
            return await embed_for_organisation(caller, **kwargs)
        finally:
            await close_clients()

    try:
        return async_to_sync(run)()
    finally:
        gateway.rows.write()


def test_an_organisation_embeds_texts_with_one_row_and_no_key(gateway, embed_tenant):
    tenant = embed_tenant()
    caller = organisation_caller(tenant.organisation.pk)
    got = embed(gateway, caller, model="embedder", texts=["alpha beta", "gamma"])
    assert got.vectors == [vector_of("alpha beta"), vector_of("gamma")]
    assert got.prompt_tokens == 3
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.endpoint, row.status, row.model, row.api_key_id) == (
        "/embeddings",
        200,
        "embedder",
        None,
    )
    assert row.input_tokens == 3 and row.cost > 0


def test_a_failure_raises_the_api_error_after_its_row(gateway, embed_tenant):
    tenant = embed_tenant()
    caller = organisation_caller(tenant.organisation.pk)
    with pytest.raises(ApiError) as refused:
        embed(gateway, caller, model="sim-model", texts=["x"], endpoint="/vector_stores")
    assert refused.value.status == 400 and refused.value.code == "model_not_supported"
    with pytest.raises(ApiError) as failed:
        embed(gateway, caller, model="embed-model", texts=["x [[embed-bad:count]]"])
    assert failed.value.status == 502
    rows = usage_rows(organisation=tenant.organisation)
    assert [(r.endpoint, r.status) for r in rows] == [("/vector_stores", 400), ("/embeddings", 502)]


def test_another_organisations_model_is_not_found(gateway, embed_tenant):
    from responses_api.catalogue.services.served_models import model_ensure

    acme = embed_tenant("acme")
    globex = embed_tenant("globex")
    model_ensure(
        organisation=acme.organisation, public_id="acme-embed", backend=acme.backend, kind="embed"
    )
    caller = organisation_caller(globex.organisation.pk)
    with pytest.raises(ApiError) as theirs:
        embed(gateway, caller, model="acme-embed", texts=["x"])
    assert (theirs.value.status, theirs.value.code) == (404, "model_not_found")
    assert len(usage_rows(organisation=globex.organisation)) == 1
    assert usage_rows(organisation=acme.organisation) == []
