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

from collections.abc import Iterator

import httpx
import pytest

from tests.embeddings.real_servers import (
    TEXTS,
    embedding_tenant,
    embeds_in_both_encodings,
    embeds_token_ids,
    generation_model_refused,
    shortened_to_unit_length,
)
from tests.vllm.conftest import UPSTREAM_MODEL, VllmServer, serving

pytestmark = [pytest.mark.vllm, pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def vllm_embed_server() -> Iterator[VllmServer]:
    server = serving("vllm-embed")
    yield server
    server.stop()


@pytest.fixture
def tenant(vllm_embed_server, transactional_db, api_server):
    return embedding_tenant(
        api_server, backend="vllm-embed", url=vllm_embed_server.url, dialect="vllm",
        upstream=UPSTREAM_MODEL,
    )  # fmt: skip


def test_vllm_pooling_runner_embeds_through_the_sdk(tenant, vllm_embed_server):
    floats = embeds_in_both_encodings(*tenant, backend="vllm-embed")
    # What vLLM itself answers: the gateway relays its vectors unchanged.
    direct = httpx.post(
        vllm_embed_server.url + "/embeddings",
        json={"model": UPSTREAM_MODEL, "input": TEXTS},
        timeout=60,
    ).json()
    assert floats.data[0].embedding == pytest.approx(direct["data"][0]["embedding"], abs=1e-6)


def test_vllm_embeds_token_ids_and_shortens_to_dimensions(tenant):
    embeds_token_ids(tenant[1])
    shortened_to_unit_length(tenant[1], norm=1e-4, values=1e-4)


def test_a_generation_model_on_the_pooling_server_is_refused(tenant):
    generation_model_refused(*tenant, upstream=UPSTREAM_MODEL)
