"""The catalogue cache: one load per organisation however many requests
miss it together; and which backends' in-flight counts are kept
(``BackendEntry.counted``): those with a concurrency limit, and those whose
load a model with several backends compares, whichever organisation that
model belongs to."""

from __future__ import annotations

import pytest

from accounts.audit import CLI
from responses_api.catalogue import catalog
from responses_api.catalogue.services.backends import backend_ensure
from responses_api.catalogue.services.served_models import deployment_set, model_ensure

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    catalog.forget()
    yield
    catalog.forget()


def counted(organisation_id: int) -> dict[tuple[str, str], bool]:
    entries = catalog.load_catalog(organisation_id).models
    return {(m.public_id, r.backend.name): r.backend.counted for m in entries for r in m.routes}


def backend(organisation, name: str, limit: int):
    made, _ = backend_ensure(
        organisation=organisation,
        name=name,
        base_url="http://127.0.0.1:9/v1",
        max_concurrency=limit,
    )
    return made


def test_a_limit_or_a_second_backend_makes_a_backend_counted(people):
    acme = people["acme"]
    free, limited, other = (
        backend(acme, "free", 0),
        backend(acme, "limited", 4),
        backend(acme, "other", 0),
    )
    model_ensure(organisation=acme, public_id="alone", backend=free)
    model_ensure(organisation=acme, public_id="capped", backend=limited)
    assert counted(acme.id) == {("alone", "free"): False, ("capped", "limited"): True}

    # Another model compares "free" with "other": "alone" now counts too.
    pair, _ = model_ensure(organisation=acme, public_id="pair", backend=free)
    assert catalog.load_catalog(acme.id).by_name["alone"].routes[0].backend.counted is False
    deployment_set(model=pair, backend=other, actor=CLI, upstream_name="pair")
    assert counted(acme.id) == {
        ("alone", "free"): True,
        ("capped", "limited"): True,
        ("pair", "free"): True,
        ("pair", "other"): True,
    }


def test_a_shared_backend_compared_in_another_organisation_is_counted_everywhere(people):
    acme, globex = people["acme"], people["globex"]
    shared, spare = backend(None, "shared", 0), backend(globex, "spare", 0)
    model_ensure(organisation=acme, public_id="m", backend=shared)
    theirs, _ = model_ensure(organisation=globex, public_id="m", backend=shared)
    assert counted(acme.id) == {("m", "shared"): False}
    cached = catalog._cache  # what get_catalog serves from
    cached[acme.id] = (float("inf"), 0.0, catalog.load_catalog(acme.id))

    deployment_set(model=theirs, backend=spare, actor=CLI, upstream_name="m")
    # A shared backend's deployments drop every organisation's catalogue.
    assert acme.id not in cached
    assert counted(acme.id) == {("m", "shared"): True}


def test_requests_missing_a_catalogue_together_share_one_load(people, monkeypatch):
    import asyncio

    from asgiref.sync import async_to_sync

    acme = people["acme"]
    model_ensure(organisation=acme, public_id="m", backend=backend(acme, "b", 0))
    loads: list[int] = []
    real = catalog.load_catalog

    def counted_load(organisation_id: int):
        loads.append(organisation_id)
        return real(organisation_id)

    monkeypatch.setattr(catalog, "load_catalog", counted_load)

    async def herd():
        return await asyncio.gather(*(catalog.get_catalog(acme.id) for _ in range(32)))

    catalogues = async_to_sync(herd)()
    assert loads == [acme.id]
    assert all(c is catalogues[0] for c in catalogues)
