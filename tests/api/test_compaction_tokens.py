"""``POST /v1/responses/input_tokens`` through the OpenAI SDK (docs/api/compaction.md):
the backend's own count where it has a tokenizer, else the stated estimate."""

from __future__ import annotations

import pytest
from openai import BadRequestError

from responses_api.translate.compaction import estimate_tokens
from tests.conftest import wait_rows
from tests.hostile import HostileBackend

pytestmark = pytest.mark.django_db

TOOLS = [
    {
        "type": "function",
        "name": "lookup",
        "description": "Find a record",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]


@pytest.fixture
def vllm(provision, local_simulator):
    """A backend with a tokenizer endpoint (the simulator speaks vLLM's)."""
    return provision("acme", local_simulator.url, dialect="vllm")


@pytest.fixture
def plain(provision, local_simulator):
    """A plain OpenAI-compatible backend: no tokenizer endpoint."""
    return provision("globex", local_simulator.url, dialect="openai")


def test_the_count_is_what_the_backend_then_reports_for_the_same_input(gateway, vllm):
    client = gateway.openai(vllm.key)
    fields = dict(
        model="sim-model",
        instructions="Answer in one line.",
        input=[
            {"role": "user", "content": "Where is the tokens-1 record? [[tokens:2]]"},
            {"role": "assistant", "content": "Looking."},
            {"role": "user", "content": "Go on"},
        ],
        tools=TOOLS,
    )
    counted = client.responses.input_tokens.count(**fields)
    assert counted.object == "response.input_tokens"
    response = client.responses.create(**fields)
    assert counted.input_tokens == response.usage.input_tokens > 0
    rows = wait_rows(2, organisation=vllm.organisation)
    count_row = next(row for row in rows if row.endpoint == "/responses/input_tokens")
    assert count_row.status == 200 and count_row.model == "sim-model"


def test_without_a_tokenizer_the_count_is_the_stated_estimate(gateway, plain):
    client = gateway.openai(plain.key)
    text = "How many tokens does this sentence take? " * 20
    counted = client.responses.input_tokens.count(model="sim-model", input=text)
    assert counted.input_tokens == estimate_tokens([{"role": "user", "content": text}], None)
    with_tools = client.responses.input_tokens.count(model="sim-model", input=text, tools=TOOLS)
    assert with_tools.input_tokens > counted.input_tokens


def test_a_count_opens_compaction_items_and_counts_the_summary(gateway, vllm):
    client = gateway.openai(vllm.key)
    history = [
        {"role": "user", "content": "Plan the tokens-2 work " * 30},
        {"role": "assistant", "content": "A long plan " * 40},
    ]
    compacted = client.responses.compact(model="sim-model", input=history)
    carried = [item.model_dump(exclude_none=True) for item in compacted.output]
    whole = client.responses.input_tokens.count(model="sim-model", input=history)
    after = client.responses.input_tokens.count(model="sim-model", input=carried)
    assert 0 < after.input_tokens < whole.input_tokens


def test_a_count_needs_a_model_and_is_refused_like_a_bad_request(gateway, vllm):
    client = gateway.openai(vllm.key)
    with pytest.raises(BadRequestError) as missing:
        client.responses.input_tokens.count(input="hi")
    assert missing.value.body["param"] == "model"
    with pytest.raises(BadRequestError) as zdr:
        client.responses.input_tokens.count(
            model="sim-model", input="hi", previous_response_id="resp_abc"
        )
    assert zdr.value.body["param"] == "previous_response_id"
    with pytest.raises(BadRequestError) as unknown:
        client.responses.input_tokens.count(model="sim-model", input=[{"type": "nope"}])
    assert unknown.value.body["param"] == "input[0].type"
    rows = wait_rows(3, organisation=vllm.organisation)
    assert sorted(row.status for row in rows) == [400, 400, 400]


@pytest.mark.parametrize(
    "answer",
    [{"count": -5}, {"count": True}, {"count": 10**30}, {"count": "12"}, [3]],
    ids=["negative", "boolean", "huge", "string", "list"],
)
def test_a_tokenizer_answer_no_prompt_can_have_gives_the_estimate(gateway, provision, answer):
    with HostileBackend() as backend:
        backend.tokenize_answer = answer
        tenant = provision("acme", backend.url, dialect="vllm")
        client = gateway.openai(tenant.key)
        counted = client.responses.input_tokens.count(model="sim-model", input="Hello there")
    assert counted.input_tokens == estimate_tokens(
        [{"role": "user", "content": "Hello there"}], None
    )


def test_a_sound_tokenizer_answer_is_taken(gateway, provision):
    with HostileBackend() as backend:
        tenant = provision("acme", backend.url, dialect="vllm")
        client = gateway.openai(tenant.key)
        counted = client.responses.input_tokens.count(model="sim-model", input="Hello there")
    assert counted.input_tokens == 7
