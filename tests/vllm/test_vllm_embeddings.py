"""``POST /v1/embeddings`` through Switchyard to a real vLLM running its
pooling runner (``--runner pooling --convert embed``): stories260K, a
generation model, turned into an embedding model by vLLM's adapter (the
last token's hidden state, normalised). One vLLM runs one runner, so this
module starts its own server and stops it when its tests are done.

vLLM refuses ``dimensions`` for a model it does not know as Matryoshka
("Model 'stories260K' does not support Matryoshka embeddings; dimensions
must be unset"), relayed as a 400; declared one (``--hf-overrides
'{"is_matryoshka": true}'``) it cuts and normalises the vectors itself."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import httpx
import pytest
from openai import BadRequestError, OpenAI

from tests.conftest import wait_rows
from tests.vllm.conftest import UPSTREAM_MODEL, VllmServer, start_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.live, pytest.mark.django_db(transaction=True)]

TEXTS = ["Once upon a time there was a cat.", "The dog ran to the park."]


@pytest.fixture(scope="module")
def vllm_embed_server(tmp_path_factory) -> Iterator[VllmServer]:
    server = start_vllm(
        tmp_path_factory,
        "vllm-embed",
        [
            *("--runner", "pooling", "--convert", "embed"),
            *("--hf-overrides", json.dumps({"is_matryoshka": True})),
        ],
    )
    yield server
    server.stop()


@pytest.fixture
def tenant(vllm_embed_server, transactional_db, api_server):
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    acme, _ = organisation_ensure(slug="acme", name="Acme")
    backend, _ = backend_ensure(
        organisation=acme, name="vllm-embed", base_url=vllm_embed_server.url, dialect="vllm"
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


def test_vllm_pooling_runner_embeds_through_the_sdk(tenant, vllm_embed_server):
    acme, client = tenant
    floats = client.embeddings.create(model="stories-embed", input=TEXTS, encoding_format="float")
    assert floats.model == "stories-embed" and [d.index for d in floats.data] == [0, 1]
    first, second = (d.embedding for d in floats.data)
    assert len(first) == len(second) > 0 and first != second
    assert math.isclose(math.fsum(v * v for v in first), 1.0, rel_tol=1e-3)
    assert floats.usage.prompt_tokens > 0
    # What vLLM itself answers: the gateway relays its vectors unchanged.
    direct = httpx.post(
        vllm_embed_server.url + "/embeddings",
        json={"model": UPSTREAM_MODEL, "input": TEXTS},
        timeout=60,
    ).json()
    assert first == pytest.approx(direct["data"][0]["embedding"], abs=1e-6)
    # The SDK's default asks for base64 and decodes it: the same float32 values.
    decoded = client.embeddings.create(model="stories-embed", input=TEXTS)
    for plain, via_base64 in zip(floats.data, decoded.data, strict=True):
        assert via_base64.embedding == pytest.approx(plain.embedding, abs=1e-6)
    rows = wait_rows(2, organisation=acme)
    assert [(r.endpoint, r.status) for r in rows] == [("/embeddings", 200)] * 2
    assert rows[0].input_tokens == floats.usage.prompt_tokens and rows[0].cost > 0
    assert rows[0].backend_name == "vllm-embed"


def test_vllm_embeds_token_ids_and_shortens_to_dimensions(tenant):
    _, client = tenant
    tokens = client.embeddings.create(
        model="stories-embed", input=[[1, 400, 60], [1, 22]], encoding_format="float"
    )
    assert len(tokens.data) == 2 and tokens.usage.prompt_tokens >= 5
    full = client.embeddings.create(model="stories-embed", input="A cat.", encoding_format="float")
    short = client.embeddings.create(
        model="stories-embed", input="A cat.", encoding_format="float", dimensions=8
    )
    vector = short.data[0].embedding
    assert len(vector) == 8 < len(full.data[0].embedding)
    assert math.isclose(math.fsum(v * v for v in vector), 1.0, rel_tol=1e-4)
    scale = full.data[0].embedding[0] / vector[0]
    assert vector == pytest.approx([v / scale for v in full.data[0].embedding[:8]], rel=1e-4)


def test_a_generation_model_on_the_pooling_server_is_refused(tenant):
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
