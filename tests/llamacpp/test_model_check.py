"""``model_check`` against a real llama-server with stories260K.

The tiny model writes stories; it follows no instruction, so only what the
server itself guarantees can pass: text (a backend-wide stop at the first
line break lets it complete), text without reasoning, the context window
(the server refuses a prompt over ``-c``) and cancellation (the row is a
499). Expected to fail, honestly: every tool capability (it never emits a
``<tool_call>`` unprompted; the prefill technique of the other tests is
not a check's prompt), reasoning on (the GGUF template has no thinking).
json_schema is reported as it comes: the grammar may force valid JSON.
"""

from __future__ import annotations

import pytest

from responses_api import catalog
from responses_api.model_check import run_check
from tests.llamacpp.conftest import UPSTREAM_MODEL

pytestmark = [pytest.mark.llamacpp, pytest.mark.live, pytest.mark.django_db(transaction=True)]

EXPECTED_TO_PASS = {"text", "reasoning_off", "context_window", "cancellation"}
EXPECTED_TO_FAIL = {"function_call", "parallel_calls", "custom_tool", "namespace_tool"}


def test_what_the_tiny_model_can_do_passes(llama_plain):
    from accounts.services import organisation_ensure
    from responses_api.services import backend_ensure, model_ensure

    catalog.forget()
    acme, _ = organisation_ensure(slug="acme", name="Acme")
    backend, _ = backend_ensure(
        organisation=acme,
        name="llama",
        base_url=llama_plain.url,
        dialect="llamacpp",
        extra_body={"stop": ["\n"]},
    )
    served, _ = model_ensure(
        organisation=acme, public_id="stories", backend=backend, upstream_name=UPSTREAM_MODEL
    )
    served.context_window = 2048
    served.save(update_fields=["context_window"])
    check = run_check("acme", "stories", "llama", timeout=60)
    verdicts = {r["name"]: r for r in check.results}
    for name in EXPECTED_TO_PASS:
        assert verdicts[name]["passed"], verdicts[name]
    for name in EXPECTED_TO_FAIL:
        assert not verdicts[name]["passed"] and verdicts[name]["raw"], verdicts[name]
    assert not check.passed
    catalog.forget()
