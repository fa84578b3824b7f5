"""``POST /v1/embeddings`` on a real llama.cpp ``llama-server --embeddings``
(stories260K), through a real daphne process and the openai SDK.

Skipped, saying why, where the binary or the model is missing (as the other
llama.cpp tests are; in CI they fail instead)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.embeddings.real_servers import (
    embedding_tenant,
    embeds_in_both_encodings,
    embeds_token_ids,
    generation_model_refused,
    shortened_to_unit_length,
)
from tests.llamacpp.conftest import (  # noqa: F401
    UPSTREAM_MODEL,
    LlamaServer,
    llama_paths,
    start_llama_server,
)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="session")
def llama_embeddings(llama_paths) -> Iterator[LlamaServer]:  # noqa: F811
    """Embeddings only, mean-pooled (OpenAI's endpoint refuses no pooling)."""
    server = start_llama_server(llama_paths, "--embeddings", "--pooling", "mean")
    yield server
    server.stop()


@pytest.fixture
def tenant(llama_embeddings, transactional_db, api_server):
    return embedding_tenant(
        api_server, backend="llama", url=llama_embeddings.url, dialect="llamacpp",
        upstream=UPSTREAM_MODEL,
    )  # fmt: skip


def test_llama_server_embeds_through_the_sdk_in_both_encodings(tenant):
    embeds_in_both_encodings(*tenant, backend="llama")


def test_dimensions_shorten_llama_servers_vectors_to_unit_length(tenant):
    """llama-server ignores ``dimensions``: the gateway cuts and rescales."""
    shortened_to_unit_length(tenant[1], norm=1e-6, values=1e-5)


def test_llama_server_embeds_token_ids(tenant):
    embeds_token_ids(tenant[1])


def test_a_generation_model_is_refused_before_reaching_the_backend(tenant):
    generation_model_refused(*tenant, upstream=UPSTREAM_MODEL)
