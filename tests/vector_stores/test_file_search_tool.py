"""The ``file_search`` tool over a store made with the Vector stores API,
all through the OpenAI SDK against a daphne process: the file uploaded and
indexed, then found by the tool and cited by the answer."""

from __future__ import annotations

import io

import openai
import pytest

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

POLICY = b"Travel expenses are reimbursed within thirty days of the claim.\n"


def test_the_tool_finds_and_cites_a_file_added_through_the_api(acme, globex):
    store = acme.vector_stores.create(name="Handbook")
    added = acme.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("policy.txt", io.BytesIO(POLICY)), poll_interval_ms=100
    )
    assert added.status == "completed"
    answer = "Within thirty days [1]."
    response = acme.responses.create(
        model="sim-model",
        input=f'[[call:file_search {{"query": "travel reimbursed"}}]] [[answer:{answer}]]',
        tools=[{"type": "file_search", "vector_store_ids": [store.id]}],
        include=["file_search_call.results"],
    )
    searched, message = response.output
    assert searched.status == "completed" and searched.results[0].file_id == added.id
    [citation] = message.content[0].annotations
    assert (citation.file_id, citation.filename, citation.index) == (
        added.id,
        "policy.txt",
        answer.index("[1]"),
    )
    # Globex naming Acme's store is answered as for a store that does not exist.
    with pytest.raises(openai.BadRequestError) as refused:
        globex.responses.create(
            model="sim-model",
            input="hi",
            tools=[{"type": "file_search", "vector_store_ids": [store.id]}],
        )
    assert refused.value.body["param"] == "tools[0].vector_store_ids"
