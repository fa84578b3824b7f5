"""``include: ["reasoning.encrypted_content"]``: reasoning the client carries
back sealed, in any organisation, through the OpenAI SDK."""

from __future__ import annotations

import base64

import pytest
from openai import BadRequestError, OpenAI

from tests.conftest import wait_rows
from tests.sim import received

pytestmark = pytest.mark.django_db

# Directive text reaches the model's reasoning verbatim: quotes, unicode, newlines.
THOUGHT = 'First, "the user" wants caf\u00e9 \u2014 then\nsecond: 2 > 1 \\ done.'
INCLUDE = ["reasoning.encrypted_content"]


@pytest.fixture
def acme(provision, local_simulator):
    return provision("acme", local_simulator.url, dialect="vllm")


@pytest.fixture
def globex(provision, local_simulator):
    return provision("globex", local_simulator.url, dialect="vllm")


def sdk(gateway, tenant) -> OpenAI:
    return gateway.openai(tenant.key)


def first_turn(client: OpenAI, marker: str, *, stream: bool = False, include=INCLUDE):
    fields = dict(
        model="sim-model",
        input=f"{marker} [[reason:{THOUGHT}]] [[tokens:2]]",
        reasoning={"effort": "high"},
        include=include,
    )
    if not stream:
        return client.responses.create(**fields)
    with client.responses.stream(**fields) as events:
        done = [e.item for e in events if e.type == "response.output_item.done"]
        return events.get_final_response(), done


def carried_back(reasoning, marker: str, **item) -> list[dict]:
    """The next turn's input, with the reasoning item reduced to its token."""
    return [
        {"role": "user", "content": "earlier"},
        {
            "type": "reasoning",
            "id": reasoning.id,
            "summary": [],
            "encrypted_content": reasoning.encrypted_content,
            **item,
        },
        {"role": "assistant", "content": "the answer"},
        {"role": "user", "content": f"{marker} [[tokens:2]]"},
    ]


def altered(token: str) -> str:
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]


def test_a_sealed_reasoning_item_sent_back_alone_gives_the_backend_that_reasoning(
    gateway, acme, local_simulator
):
    client = sdk(gateway, acme)
    response = first_turn(client, "seal-marker-1")
    reasoning = response.output[0]
    assert reasoning.type == "reasoning" and reasoning.content[0].text == THOUGHT
    token = reasoning.encrypted_content
    assert token.startswith("sy1.")
    sealed = base64.urlsafe_b64decode(token[4:] + "=" * (-len(token[4:]) % 4))
    assert "wants café".encode() not in sealed  # the thought is not carried in clear
    follow = client.responses.create(
        model="sim-model", input=carried_back(reasoning, "seal-marker-2")
    )
    assert follow.status == "completed"
    assistant = received(local_simulator, "seal-marker-2")["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": "the answer",
        "reasoning_content": THOUGHT,
    }


def test_a_streamed_answer_seals_its_reasoning_in_the_item_done_and_the_final_response(
    gateway, acme, local_simulator
):
    client = sdk(gateway, acme)
    final, done = first_turn(client, "seal-marker-3", stream=True)
    token = done[0].encrypted_content
    assert done[0].type == "reasoning" and token.startswith("sy1.")
    assert final.output[0].encrypted_content == token
    client.responses.create(model="sim-model", input=carried_back(final.output[0], "seal-marker-4"))
    assert received(local_simulator, "seal-marker-4")["messages"][1]["reasoning_content"] == THOUGHT


def test_without_include_reasoning_stays_plaintext(gateway, acme):
    response = first_turn(sdk(gateway, acme), "seal-marker-5", include=None)
    reasoning = response.output[0]
    assert reasoning.content[0].text == THOUGHT and reasoning.encrypted_content is None


def test_an_altered_token_is_a_400_naming_the_item(gateway, acme):
    client = sdk(gateway, acme)
    reasoning = first_turn(client, "seal-marker-6").output[0]
    reasoning.encrypted_content = altered(reasoning.encrypted_content)
    with pytest.raises(BadRequestError) as caught:
        client.responses.create(model="sim-model", input=carried_back(reasoning, "seal-marker-7"))
    error = caught.value.body
    assert error["param"] == "input[1].encrypted_content"
    assert error["code"] == "invalid_encrypted_content" and "input[1]" in error["message"]
    assert caught.value.response.headers["x-request-id"]
    rows = wait_rows(organisation=acme.organisation, count=2)
    assert [row.status for row in rows] == [200, 400]


def test_another_organisations_token_is_refused_as_an_altered_one_is(gateway, acme, globex):
    reasoning = first_turn(sdk(gateway, acme), "seal-marker-8").output[0]
    other = sdk(gateway, globex)
    with pytest.raises(BadRequestError) as caught:
        other.responses.create(model="sim-model", input=carried_back(reasoning, "seal-marker-9"))
    stolen = caught.value.response.json()["error"]
    reasoning.encrypted_content = altered(reasoning.encrypted_content)
    with pytest.raises(BadRequestError) as caught:
        other.responses.create(model="sim-model", input=carried_back(reasoning, "seal-marker-9"))
    broken = caught.value.response.json()["error"]
    assert stolen == broken
    assert stolen["param"] == "input[1].encrypted_content"
    # Globex's own tokens open for Globex.
    own = first_turn(other, "seal-marker-10").output[0]
    assert other.responses.create(model="sim-model", input=carried_back(own, "seal-marker-11"))
