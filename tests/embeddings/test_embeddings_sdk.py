"""``POST /v1/embeddings`` through the openai SDK, on the simulator: exact
vectors in both encodings, token ids, and the usage row each request leaves."""

from __future__ import annotations

import base64
from decimal import Decimal

import numpy as np
import pytest

from responses_api.simulator.embeddings import vector_of
from tests.conftest import usage_rows

pytestmark = pytest.mark.django_db


def test_float_embeddings_are_the_backends_vectors_in_order(gateway, embed_tenant):
    tenant = embed_tenant()
    client = gateway.openai(tenant.key)
    texts = ["the quick brown fox", "jumps over", "the lazy dog"]
    result = client.embeddings.create(model="embed-model", input=texts, encoding_format="float")
    assert result.object == "list" and result.model == "embed-model"
    assert [d.index for d in result.data] == [0, 1, 2]
    assert [d.object for d in result.data] == ["embedding"] * 3
    assert [d.embedding for d in result.data] == [vector_of(t) for t in texts]
    assert result.usage.prompt_tokens == result.usage.total_tokens == 9
    [row] = usage_rows(organisation=tenant.organisation)
    assert (row.endpoint, row.status, row.model) == ("/embeddings", 200, "embed-model")
    assert row.input_tokens == 9 and row.output_tokens == 0 and row.backend_name == "sim"
    # 9 tokens at 2 per million.
    assert row.cost == Decimal("0.000018")


def test_the_sdks_default_base64_decodes_to_the_same_vectors(gateway, embed_tenant):
    """Without encoding_format the SDK asks for base64 and decodes it."""
    client = gateway.openai(embed_tenant().key)
    result = client.embeddings.create(model="embed-model", input="a single text")
    assert result.data[0].embedding == vector_of("a single text")


def test_base64_is_little_endian_float32(gateway, embed_tenant):
    client = gateway.openai(embed_tenant().key)
    result = client.embeddings.create(
        model="embedder", input=["one", "two"], encoding_format="base64", dimensions=8
    )
    assert result.model == "embedder"
    for item, text in zip(result.data, ["one", "two"], strict=True):
        assert isinstance(item.embedding, str)
        decoded = np.frombuffer(base64.b64decode(item.embedding), dtype="<f4")
        assert decoded.tolist() == vector_of(text, 8)


def test_token_ids_are_embedded_as_given(gateway, embed_tenant):
    tenant = embed_tenant()
    client = gateway.openai(tenant.key)
    single = client.embeddings.create(
        model="embed-model", input=[5, 17, 42], encoding_format="float"
    )
    assert [d.embedding for d in single.data] == [vector_of([5, 17, 42])]
    assert single.usage.prompt_tokens == 3
    several = client.embeddings.create(
        model="embed-model", input=[[1, 2], [3]], encoding_format="float"
    )
    assert [d.embedding for d in several.data] == [vector_of([1, 2]), vector_of([3])]
    assert [r.input_tokens for r in usage_rows(organisation=tenant.organisation)] == [3, 3]


def test_dimensions_are_passed_on(gateway, embed_tenant):
    client = gateway.openai(embed_tenant().key)
    result = client.embeddings.create(
        model="embed-model", input="short", dimensions=4, encoding_format="float"
    )
    assert result.data[0].embedding == vector_of("short", 4)


def test_the_api_prefix_serves_embeddings_too(gateway, embed_tenant):
    client = gateway.openai(embed_tenant().key, prefix="/api/v1")
    result = client.embeddings.create(model="embed-model", input="x", encoding_format="float")
    assert result.data[0].embedding == vector_of("x")


def test_models_lists_embedding_and_generation_models(gateway, embed_tenant):
    client = gateway.openai(embed_tenant().key)
    assert {m.id for m in client.models.list()} == {"sim-model", "embed-model"}


def test_more_dimensions_than_the_model_gives_is_a_400(gateway, embed_tenant):
    """The simulator answers at most 4096 dimensions, whatever is asked."""
    from openai import BadRequestError

    tenant = embed_tenant()
    client = gateway.openai(tenant.key)
    with pytest.raises(BadRequestError) as refused:
        client.embeddings.create(model="embed-model", input="x", dimensions=5000)
    assert refused.value.body["param"] == "dimensions"
    assert "4096 dimensions" in refused.value.body["message"]
