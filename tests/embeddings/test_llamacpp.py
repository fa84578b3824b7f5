"""``POST /v1/embeddings`` on a real llama.cpp ``llama-server --embeddings``
(stories260K), through a real daphne process and the openai SDK.

Skipped, saying why, where the binary or the model is missing (as the other
llama.cpp tests are; in CI they fail instead)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from openai import BadRequestError, OpenAI

from tests.conftest import wait_rows
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
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    acme, _ = organisation_ensure(slug="acme", name="Acme")
    backend, _ = backend_ensure(
        organisation=acme, name="llama", base_url=llama_embeddings.url, dialect="llamacpp"
    )
    model_ensure(
        organisation=acme,
        public_id="stories-embed",
        backend=backend,
        upstream_name=UPSTREAM_MODEL,
        kind="embed",
        price_input=1,
    )
    _, key = api_key_create(organisation=acme, name="embeddings key")
    client = OpenAI(base_url=api_server.url + "/v1", api_key=key, max_retries=0)
    return acme, client


def test_llama_server_embeds_through_the_sdk_in_both_encodings(tenant):
    acme, client = tenant
    texts = ["Once upon a time there was a cat.", "The dog ran to the park."]
    floats = client.embeddings.create(model="stories-embed", input=texts, encoding_format="float")
    assert floats.model == "stories-embed" and [d.index for d in floats.data] == [0, 1]
    first, second = (d.embedding for d in floats.data)
    assert len(first) == len(second) > 0 and first != second
    # llama-server normalises OpenAI-style embeddings to unit length.
    assert math.isclose(math.fsum(v * v for v in first), 1.0, rel_tol=1e-3)
    assert floats.usage.prompt_tokens > 0
    # The SDK's default asks for base64 and decodes it: the same float32 values.
    decoded = client.embeddings.create(model="stories-embed", input=texts)
    for plain, via_base64 in zip(floats.data, decoded.data, strict=True):
        assert via_base64.embedding == pytest.approx(plain.embedding, abs=1e-6)
    rows = wait_rows(2, organisation=acme)
    assert [(r.endpoint, r.status) for r in rows] == [("/embeddings", 200)] * 2
    assert rows[0].input_tokens == floats.usage.prompt_tokens and rows[0].cost > 0
    assert rows[0].backend_name == "llama"


def test_dimensions_shorten_llama_servers_vectors_to_unit_length(tenant):
    """llama-server ignores ``dimensions``: the gateway cuts and rescales."""
    _, client = tenant
    full = client.embeddings.create(model="stories-embed", input="A cat.", encoding_format="float")
    short = client.embeddings.create(
        model="stories-embed", input="A cat.", encoding_format="float", dimensions=8
    )
    vector = short.data[0].embedding
    assert len(vector) == 8 < len(full.data[0].embedding)
    assert math.isclose(math.fsum(v * v for v in vector), 1.0, rel_tol=1e-6)
    scale = full.data[0].embedding[0] / vector[0]
    assert vector == pytest.approx([v / scale for v in full.data[0].embedding[:8]], rel=1e-5)


def test_llama_server_embeds_token_ids(tenant):
    _, client = tenant
    result = client.embeddings.create(
        model="stories-embed", input=[[1, 400, 60], [1, 22]], encoding_format="float"
    )
    assert len(result.data) == 2 and result.usage.prompt_tokens >= 5


def test_a_generation_model_is_refused_before_reaching_the_backend(tenant):
    from responses_api.catalogue.services.served_models import model_ensure
    from responses_api.models import Backend

    acme, client = tenant
    model_ensure(
        organisation=acme,
        public_id="stories",
        backend=Backend.objects.get(organisation=acme),
        upstream_name=UPSTREAM_MODEL,
    )
    with pytest.raises(BadRequestError) as refused:
        client.embeddings.create(model="stories", input="hello")
    assert refused.value.code == "model_not_supported"
