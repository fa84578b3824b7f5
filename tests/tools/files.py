"""Vector stores for the file search tests: Acme's handbook, its files
embedded by the simulator (the organisation's ``embed-model``) through the
gateway's own entry point, as ingestion does."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from asgiref.sync import async_to_sync

from responses_api.access.auth import organisation_caller
from responses_api.backends.client import close_clients
from responses_api.pipeline.embedding import embed_for_organisation
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.stores import vector_store_create

REFUNDS = "Refunds are paid within 14 days of the returned parcel arriving at the warehouse."
TRAVEL = "Travel expenses need a receipt and the approval of a manager before booking."


@dataclass
class Handbook:
    store_id: str
    organisation_id: int


def embed_model(org, url: str, name: str = "embedder") -> None:
    """Give ``org`` an embedding model (``embed-model``) on a backend at ``url``."""
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    backend, _ = backend_ensure(organisation=org, name=name, base_url=url, dialect="openai")
    model_ensure(
        organisation=org,
        public_id="embed-model",
        backend=backend,
        upstream_name="sim-embed",
        kind="embed",
    )


def embedder(organisation_id: int):
    """The embed callable ingestion takes, on the organisation's model."""
    caller = organisation_caller(organisation_id)

    async def run(texts: list[str]) -> list[list[float]]:
        try:
            embedded = await embed_for_organisation(caller, model="embed-model", texts=texts)
        finally:
            await close_clients()
        return embedded.vectors

    return lambda texts: async_to_sync(run)(list(texts))


def handbook(org, files: dict[str, tuple[str, str, dict]] | None = None) -> Handbook:
    """A store of ``org`` holding ``files`` (file id → name, text, attributes)."""
    store = vector_store_create(organisation_id=org.id, name="handbook")
    embed = embedder(org.id)
    files = files or {
        "file-refunds": ("refunds.md", REFUNDS, {"team": "finance"}),
        "file-travel": ("travel.md", TRAVEL, {"team": "ops"}),
    }
    for file_id, (name, text, attributes) in files.items():
        done = ingest_file(
            org.id, store.id, file_id, text.encode(), name, embed, attributes=attributes
        )
        assert done.status == "completed", done.last_error
    return Handbook(store.id, org.id)


@pytest.fixture
def store(gateway, acme, people, local_simulator) -> Handbook:
    """Acme's handbook, on an embedding model of the simulator (the rows of
    its embeddings written as the gateway writes them)."""
    embed_model(people["acme"], local_simulator.url)
    made = handbook(people["acme"])
    gateway.rows.write()
    return made
