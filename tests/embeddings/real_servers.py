"""What the embedding tests on real servers (llama.cpp's, vLLM's pooling
runner) check alike, through a real daphne process and the openai SDK."""

from __future__ import annotations

import math

import pytest
from openai import BadRequestError, OpenAI

from tests.conftest import wait_rows

TEXTS = ["Once upon a time there was a cat.", "The dog ran to the park."]


def embedding_tenant(api_server, *, backend: str, url: str, dialect: str, upstream: str):
    """Acme with one embedding model, ``stories-embed``, on ``url``; and an
    SDK client with Acme's key."""
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    acme, _ = organisation_ensure(slug="acme", name="Acme")
    served, _ = backend_ensure(organisation=acme, name=backend, base_url=url, dialect=dialect)
    model_ensure(
        organisation=acme,
        public_id="stories-embed",
        backend=served,
        upstream_name=upstream,
        kind="embed",
        price_input=1,
    )
    _, key = api_key_create(organisation=acme, name="embeddings key")
    return acme, OpenAI(base_url=api_server.url + "/v1", api_key=key, max_retries=0)


def embeds_in_both_encodings(acme, client: OpenAI, *, backend: str):
    """Two texts as floats, then as base64 (the SDK's default, decoded to the
    same float32 values), each request a row; the floats' answer."""
    floats = client.embeddings.create(model="stories-embed", input=TEXTS, encoding_format="float")
    assert floats.model == "stories-embed" and [d.index for d in floats.data] == [0, 1]
    first, second = (d.embedding for d in floats.data)
    assert len(first) == len(second) > 0 and first != second
    # Both servers normalise OpenAI-style embeddings to unit length.
    assert math.isclose(math.fsum(v * v for v in first), 1.0, rel_tol=1e-3)
    assert floats.usage.prompt_tokens > 0
    decoded = client.embeddings.create(model="stories-embed", input=TEXTS)
    for plain, via_base64 in zip(floats.data, decoded.data, strict=True):
        assert via_base64.embedding == pytest.approx(plain.embedding, abs=1e-6)
    rows = wait_rows(2, organisation=acme)
    assert [(r.endpoint, r.status) for r in rows] == [("/embeddings", 200)] * 2
    assert rows[0].input_tokens == floats.usage.prompt_tokens and rows[0].cost > 0
    assert rows[0].backend_name == backend
    return floats


def shortened_to_unit_length(client: OpenAI, *, norm: float, values: float) -> None:
    """``dimensions=8``: the first eight of the full vector, rescaled to unit
    length (by the server, or by the gateway where the server ignores it)."""
    full = client.embeddings.create(model="stories-embed", input="A cat.", encoding_format="float")
    short = client.embeddings.create(
        model="stories-embed", input="A cat.", encoding_format="float", dimensions=8
    )
    vector = short.data[0].embedding
    assert len(vector) == 8 < len(full.data[0].embedding)
    assert math.isclose(math.fsum(v * v for v in vector), 1.0, rel_tol=norm)
    scale = full.data[0].embedding[0] / vector[0]
    assert vector == pytest.approx([v / scale for v in full.data[0].embedding[:8]], rel=values)


def embeds_token_ids(client: OpenAI) -> None:
    result = client.embeddings.create(
        model="stories-embed", input=[[1, 400, 60], [1, 22]], encoding_format="float"
    )
    assert len(result.data) == 2 and result.usage.prompt_tokens >= 5


def generation_model_refused(acme, client: OpenAI, *, upstream: str) -> None:
    """A generation model on the same backend is refused before reaching it."""
    from responses_api.catalogue.services.served_models import model_ensure
    from responses_api.models import Backend

    model_ensure(
        organisation=acme,
        public_id="stories",
        backend=Backend.objects.get(organisation=acme),
        upstream_name=upstream,
    )
    with pytest.raises(BadRequestError) as refused:
        client.embeddings.create(model="stories", input="hello")
    assert refused.value.code == "model_not_supported"
