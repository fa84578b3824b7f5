"""Compaction and input token counts against a real llama-server (docs/api/compaction.md):
its tokenizer counts the input, and its own answer to the summarisation prompt is
the summary the compaction item seals."""

from __future__ import annotations

import httpx
import pytest

from responses_api.translate.compaction import SUMMARY_PROMPT, context
from tests.conftest import wait_rows
from tests.llamacpp.conftest import UPSTREAM_MODEL

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
]

# Greedy, and one line: stories260K never ends an answer by itself.
SETTINGS = {"stop": ["\n"], "temperature": 0}
CONVERSATION = [
    {"role": "user", "content": "Tell me a story about a cat."},
    {"role": "assistant", "content": "Once upon a time there was a cat named Tom."},
    {"role": "user", "content": "What did Tom do next?"},
]


def test_the_count_is_llama_servers_own(llama_plain, llama_tenant):
    tenant = llama_tenant(llama_plain, extra_body=SETTINGS)
    counted = tenant.client.responses.input_tokens.count(model="stories", input=CONVERSATION)
    response = tenant.client.responses.create(
        model="stories", input=CONVERSATION, max_output_tokens=8
    )
    assert counted.input_tokens == response.usage.input_tokens > 0


def test_the_compaction_item_seals_llama_servers_summary(llama_plain, llama_tenant):
    from responses_api.store.seal import reasoning_seal

    tenant = llama_tenant(llama_plain, extra_body=SETTINGS)
    compacted = tenant.client.responses.compact(model="stories", input=CONVERSATION)
    assert [item.type for item in compacted.output] == ["message", "message", "compaction"]
    direct = httpx.post(
        llama_plain.url + "/chat/completions",
        json={
            "model": UPSTREAM_MODEL,
            "messages": [*CONVERSATION, {"role": "user", "content": SUMMARY_PROMPT}],
            "chat_template_kwargs": {"enable_thinking": False},
            **SETTINGS,
        },
        timeout=60,
    ).json()
    expected = direct["choices"][0]["message"]["content"].strip()
    token = compacted.output[-1].encrypted_content
    sealed = reasoning_seal(tenant.organisation.id).open(token, context("stories"))
    assert sealed == (expected or "(The model wrote no summary.)")
    assert compacted.usage.input_tokens == direct["usage"]["prompt_tokens"]
    follow = tenant.client.responses.create(
        model="stories",
        input=[
            *[item.model_dump(exclude_none=True) for item in compacted.output],
            {"role": "user", "content": "And then?"},
        ],
        max_output_tokens=8,
    )
    assert follow.status in {"completed", "incomplete"}
    rows = wait_rows(2, organisation=tenant.organisation)
    assert [row.status for row in rows] == [200, 200]
