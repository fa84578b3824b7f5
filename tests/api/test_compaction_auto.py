"""``context_management: [{"type": "compaction", "compact_threshold": N}]``
(docs/api/compaction.md): an input past N tokens is compacted before it is
answered, and the response says so."""

from __future__ import annotations

import httpx
import pytest

from responses_api.translate.compaction import SUMMARY_PREFIX, SUMMARY_PROMPT
from tests.conftest import wait_rows
from tests.sim import received

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(provision, local_simulator):
    return provision("acme", local_simulator.url, dialect="vllm")


def history(marker: str) -> list[dict]:
    return [
        {"role": "user", "content": f"Draft the {marker} report " + "with many details " * 20},
        {"role": "assistant", "content": "Here is a long draft " * 30},
        {"role": "user", "content": f"Shorten it, {marker}-last [[tokens:4]]"},
    ]


def _recent(simulator) -> list[dict]:
    answer = httpx.get(simulator.url.removesuffix("/v1") + "/_sim/requests", timeout=5)
    return answer.json()["data"]


def test_an_input_past_the_threshold_is_compacted_first_and_the_response_says_so(
    gateway, acme, local_simulator
):
    client = gateway.openai(acme.key)
    counted = client.responses.input_tokens.count(model="sim-model", input=history("auto-1"))
    response = client.responses.create(
        model="sim-model",
        input=history("auto-1"),
        context_management=[{"type": "compaction", "compact_threshold": counted.input_tokens - 1}],
    )
    assert [item.type for item in response.output] == ["compaction", "message"]
    notices = response.model_extra["switchyard"]["notices"]
    assert [n["code"] for n in notices] == ["context_compacted"]
    answered, summarised = _recent(local_simulator)[:2]
    assert summarised["messages"][-1]["content"] == SUMMARY_PROMPT
    assert answered["messages"][0]["content"].startswith(SUMMARY_PREFIX)
    assert [m["content"] for m in answered["messages"][1:]] == [
        "Shorten it, auto-1-last [[tokens:4]]"
    ]
    # One row for the request, counting both of its backend calls.
    rows = wait_rows(2, organisation=acme.organisation)
    assert len(rows) == 2  # the count, then the request: one row each
    row = next(row for row in rows if row.endpoint == "/responses")
    assert row.endpoint == "/responses" and row.status == 200
    assert row.input_tokens == response.usage.input_tokens > counted.input_tokens


def test_an_input_under_the_threshold_is_answered_as_it_is(gateway, acme, local_simulator):
    client = gateway.openai(acme.key)
    response = client.responses.create(
        model="sim-model",
        input=history("auto-2"),
        context_management=[{"type": "compaction", "compact_threshold": 100_000}],
    )
    assert [item.type for item in response.output] == ["message"]
    assert not response.model_extra["switchyard"]["notices"]
    assert received(local_simulator, "auto-2")["messages"][-1]["content"].endswith("[[tokens:4]]")


def test_a_streamed_answer_starts_with_the_compaction_item_and_it_carries_on(
    gateway, acme, local_simulator
):
    client = gateway.openai(acme.key)
    with client.responses.stream(
        model="sim-model",
        input=history("auto-3"),
        context_management=[{"type": "compaction", "compact_threshold": 10}],
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    done = [(e.output_index, e.item.type) for e in events if e.type == "response.output_item.done"]
    assert done == [(0, "compaction"), (1, "message")]
    assert [item.type for item in final.output] == ["compaction", "message"]
    follow = client.responses.create(
        model="sim-model",
        input=[
            final.output[0].model_dump(exclude_none=True),
            {"role": "user", "content": "auto-4 and now? [[tokens:2]]"},
        ],
    )
    assert [item.type for item in follow.output] == ["message"]
    sent = received(local_simulator, "auto-4")["messages"]
    assert sent[0]["content"].startswith(SUMMARY_PREFIX) and "auto-3" in sent[0]["content"]


def test_context_management_takes_only_compaction(gateway, acme):
    from openai import BadRequestError

    client = gateway.openai(acme.key)
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(
            model="sim-model", input="hi", context_management=[{"type": "truncate"}]
        )
    assert refused.value.body["param"].startswith("context_management[0]")
