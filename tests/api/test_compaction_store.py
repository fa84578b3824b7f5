"""Compaction in organisations that store responses and in those that store
nothing (docs/api/compaction.md): ``previous_response_id`` in
``responses.compact`` is the caller's own chain or a 400, and a ZDR
organisation compacts without anything being kept."""

from __future__ import annotations

import pytest
from openai import BadRequestError

from responses_api.translate.compaction import SUMMARY_PREFIX, SUMMARY_PROMPT
from tests.sim import received
from tests.store.conftest import store_policy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acme(provision, local_simulator, people):
    store_policy(people["acme"])
    return provision("acme", local_simulator.url, dialect="vllm")


@pytest.fixture
def globex(provision, local_simulator, people):
    store_policy(people["globex"])
    return provision("globex", local_simulator.url, dialect="vllm")


@pytest.fixture
def initech(provision, local_simulator, people):
    """The default policy: zero data retention."""
    from accounts.services.organisations import organisation_ensure

    people["initech"] = organisation_ensure(slug="initech", name="Initech")[0]
    return provision("initech", local_simulator.url, dialect="vllm")


def test_compact_takes_the_callers_stored_chain(gateway, acme, local_simulator):
    client = gateway.openai(acme.key)
    first = client.responses.create(model="sim-model", input="Start the store-1 task [[tokens:3]]")
    compacted = client.responses.compact(
        model="sim-model",
        previous_response_id=first.id,
        input=[{"role": "user", "content": "and the store-2 part"}],
    )
    users = [item.content[0].text for item in compacted.output if item.type == "message"]
    assert users == ["Start the store-1 task [[tokens:3]]", "and the store-2 part"]
    assert compacted.output[-1].type == "compaction"
    messages = received(local_simulator, "store-2")["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "user"]
    follow = client.responses.create(
        model="sim-model",
        input=[
            *[item.model_dump(exclude_none=True) for item in compacted.output],
            {"role": "user", "content": "store-3 next [[tokens:1]]"},
        ],
    )
    assert follow.status == "completed"
    sent = received(local_simulator, "store-3")["messages"]
    assert sum(m["content"].startswith(SUMMARY_PREFIX) for m in sent) == 1


def test_another_organisations_response_id_is_unknown_to_compact(gateway, acme, globex):
    theirs = gateway.openai(globex.key).responses.create(model="sim-model", input="secret plan")
    client = gateway.openai(acme.key)
    with pytest.raises(BadRequestError) as foreign:
        client.responses.compact(model="sim-model", previous_response_id=theirs.id)
    with pytest.raises(BadRequestError) as missing:
        client.responses.compact(model="sim-model", previous_response_id="resp_" + "0" * 32)
    assert foreign.value.body["code"] == missing.value.body["code"] == "previous_response_not_found"
    assert foreign.value.body["param"] == "previous_response_id"
    assert foreign.value.body["message"].replace(theirs.id, "ID") == missing.value.body[
        "message"
    ].replace("resp_" + "0" * 32, "ID")


def test_a_zdr_organisation_compacts_and_keeps_nothing(gateway, initech, local_simulator):
    from responses_api.models import StoredResponse

    client = gateway.openai(initech.key)
    compacted = client.responses.compact(
        model="sim-model", input=[{"role": "user", "content": "zdr-1 task"}]
    )
    follow = client.responses.create(
        model="sim-model",
        store=True,
        input=[
            *[item.model_dump(exclude_none=True) for item in compacted.output],
            {"role": "user", "content": "zdr-2 next [[tokens:1]]"},
        ],
    )
    assert follow.status == "completed"
    assert received(local_simulator, "zdr-2")["messages"][1]["content"].startswith(SUMMARY_PREFIX)
    assert StoredResponse.objects.count() == 0
    with pytest.raises(BadRequestError) as chained:
        client.responses.compact(model="sim-model", previous_response_id=follow.id)
    assert chained.value.body["param"] == "previous_response_id"


def test_a_stored_compaction_continues_with_previous_response_id(gateway, acme, local_simulator):
    client = gateway.openai(acme.key)
    first = client.responses.create(
        model="sim-model", input=[{"role": "user", "content": "store-4 start [[tokens:2]]"}]
    )
    compacted = client.responses.create(
        model="sim-model", previous_response_id=first.id, input=[{"type": "compaction_trigger"}]
    )
    assert [item.type for item in compacted.output] == ["compaction"]
    follow = client.responses.create(
        model="sim-model", previous_response_id=compacted.id, input="store-5 next [[tokens:1]]"
    )
    assert follow.status == "completed"
    sent = received(local_simulator, "store-5")["messages"]
    assert sum(m["content"].startswith(SUMMARY_PREFIX) for m in sent) == 1
    assert not any(m["content"] == SUMMARY_PROMPT for m in sent)


def test_a_count_takes_only_the_callers_stored_chain(gateway, acme, globex):
    theirs = gateway.openai(globex.key).responses.create(model="sim-model", input="secret plan")
    client = gateway.openai(acme.key)
    with pytest.raises(BadRequestError) as foreign:
        client.responses.input_tokens.count(
            model="sim-model", previous_response_id=theirs.id, input="hi"
        )
    assert foreign.value.body["code"] == "previous_response_not_found"
    own = client.responses.create(model="sim-model", input="own plan " * 30)
    counted = client.responses.input_tokens.count(
        model="sim-model", previous_response_id=own.id, input="hi"
    )
    alone = client.responses.input_tokens.count(model="sim-model", input="hi")
    assert counted.input_tokens > alone.input_tokens
