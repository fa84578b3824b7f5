"""Organisations with an embedding model on the simulator (``embed-model``)
beside a generation model (``sim-model``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass
class EmbedTenant:
    organisation: object
    backend: object
    key: str


@pytest.fixture
def embed_tenant(people, local_simulator):
    """Give an organisation the simulator as a backend, serving a generation
    model and an embedding model, and a key (``key_options``: its limits)."""
    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    def make(slug: str = "acme", url: str | None = None, **key_options) -> EmbedTenant:
        org = people[slug]
        backend, _ = backend_ensure(
            organisation=org, name="sim", base_url=url or local_simulator.url, dialect="openai"
        )
        model_ensure(organisation=org, public_id="sim-model", backend=backend)
        model_ensure(
            organisation=org,
            public_id="embed-model",
            backend=backend,
            upstream_name="sim-embed",
            kind="embed",
            price_input=2,
            aliases=["embedder"],
        )
        _, key = api_key_create(organisation=org, name=f"{slug} key", **key_options)
        return EmbedTenant(org, backend, key)

    return make
