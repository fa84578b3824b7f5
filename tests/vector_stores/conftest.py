"""Vector store fixtures: Acme and Globex with an embedding model on the
simulator (``embed-model``, deterministic vectors), and a daphne process of
the API keeping files in a folder of the test run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from tests.conftest import Proc, server_env, start_daphne
from tests.embeddings.conftest import EmbedTenant, embed_tenant  # noqa: F401


@pytest.fixture(autouse=True)
def _fresh_indexes():
    from responses_api.retrieval.vectors import indexes

    indexes.stores.clear()
    yield
    indexes.stores.clear()


@pytest.fixture(scope="session")
def vs_files_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("vs-files")


@pytest.fixture(scope="session")
def vs_server(django_db_setup, django_db_blocker, vs_files_dir) -> Iterator[Proc]:
    proc = start_daphne(
        server_env(
            SWITCHYARD_FILES_DIR=str(vs_files_dir),
            SWITCHYARD_RETRIEVAL_MAX_TEXT_CHARS="2000000",
            # No Celery worker runs in the tests: ingestion on the pool.
            SWITCHYARD_BACKGROUND_RUNNER="local",
        )
    )
    yield proc
    proc.stop()


def sdk(server: Proc, key: str, prefix: str = "/v1") -> OpenAI:
    return OpenAI(api_key=key, base_url=server.url + prefix, max_retries=0, timeout=60)


@pytest.fixture
def tenants(embed_tenant, simulator) -> tuple[EmbedTenant, EmbedTenant]:  # noqa: F811
    return embed_tenant("acme", simulator.url), embed_tenant("globex", simulator.url)


@pytest.fixture
def acme(vs_server, tenants) -> OpenAI:
    return sdk(vs_server, tenants[0].key)


@pytest.fixture
def globex(vs_server, tenants) -> OpenAI:
    return sdk(vs_server, tenants[1].key)
