"""The summary an automatic compaction writes first (docs/api/compaction.md):
it has the first-token deadline of any answer, and the backend's
tokenizer is asked only when the input could reach the threshold.

In-process (``tests.inprocess``), against a real backend over HTTP
(``tests.hostile``) that answers ``/tokenize`` and can stay silent."""

from __future__ import annotations

import time

import pytest

from responses_api.translate.compaction import SUMMARY_PROMPT, estimate_tokens
from tests.conftest import usage_rows
from tests.hostile import HostileBackend
from tests.pipeline.test_hold_lifetime import assert_nothing_held
from tests.pipeline.test_limits_every_path import PRICES, organisation_budget

pytestmark = pytest.mark.django_db(transaction=True)

HISTORY = [
    {"role": "user", "content": "Draft the report " + "with many details " * 20},
    {"role": "assistant", "content": "Here is a long draft " * 30},
    {"role": "user", "content": "Shorten it"},
]


@pytest.fixture
def backend():
    with HostileBackend() as server:
        yield server


@pytest.fixture
def acme(provision, backend):
    """Acme on the backend (vLLM's dialect: it has a tokenizer), its model
    given 1 s for a first token, under a budget."""
    from responses_api.catalogue import catalog
    from responses_api.catalogue.services.served_models import model_ensure

    catalog.forget()
    made = provision("acme", backend.url, dialect="vllm")
    model_ensure(
        organisation=made.organisation,
        public_id="sim-model",
        backend=made.backend,
        first_token_timeout=1,
        **PRICES,
    )
    organisation_budget(made.organisation, "100.00")
    yield made
    catalog.forget()


def create(gateway, key: str, threshold: int, **fields):
    return gateway.http.post(
        "/v1/responses",
        headers={"authorization": f"Bearer {key}"},
        json={
            "model": "sim-model",
            "input": HISTORY,
            "context_management": [{"type": "compaction", "compact_threshold": threshold}],
            **fields,
        },
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_summary_whose_first_token_never_comes_is_a_504_within_the_deadline(
    gateway, acme, backend, settings, stream
):
    # Without the deadline the summary would wait for the read timeout.
    settings.SWITCHYARD_READ_TIMEOUT = 8.0
    backend.tokenize_answer = {"count": 5000}
    backend.behaviour = "hang-after-headers"
    started = time.monotonic()
    answer = create(gateway, acme.key, 100, stream=stream)
    took = time.monotonic() - started
    assert answer.status_code == 504, answer.text
    error = answer.json()["error"]
    assert error["code"] == "backend_timeout"
    assert error["message"] == "Backend 'sim' sent no token within 1 s."
    assert took < 6
    (asked,) = backend.requests  # the summary; no answer was asked for
    assert asked["messages"][-1]["content"] == SUMMARY_PROMPT
    gateway.rows.write()
    (row,) = usage_rows(organisation=acme.organisation)
    assert (row.status, row.error_code) == (504, "backend_timeout")
    assert_nothing_held(acme.organisation)


def test_an_input_far_below_the_threshold_asks_no_tokenizer(gateway, acme, backend):
    answer = create(gateway, acme.key, 100_000)
    assert answer.status_code == 200, answer.text
    assert [item["type"] for item in answer.json()["output"]] == ["message"]
    assert backend.tokenize_calls == 0
    assert len(backend.requests) == 1


def test_an_input_that_could_reach_the_threshold_is_counted_by_the_tokenizer(
    gateway, acme, backend
):
    estimate = estimate_tokens(HISTORY, None)
    # Past what the estimate alone can rule out, yet above the backend's count.
    threshold = 4 * estimate
    assert threshold > backend.tokenize_answer["count"]
    answer = create(gateway, acme.key, threshold)
    assert answer.status_code == 200, answer.text
    assert [item["type"] for item in answer.json()["output"]] == ["message"]
    assert backend.tokenize_calls == 1
    backend.tokenize_answer = {"count": threshold + 1}
    compacted = create(gateway, acme.key, threshold)
    assert [item["type"] for item in compacted.json()["output"]] == ["compaction", "message"]
    assert backend.tokenize_calls == 2
