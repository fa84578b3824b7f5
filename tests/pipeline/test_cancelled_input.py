"""A request the client cancels before the backend reported its usage
still read a prompt: its row counts the prompt's estimate as input tokens
and marks them estimated. A request that completes counts what the backend
reported, not estimated."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from responses_api.pipeline.exchange import prompt_tokens
from responses_api.protocol.body import CreateResponse
from responses_api.translate.request import ModelLimits, prepare_chat
from tests.api.test_consumer import Client, body, run, scope

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tenant(provision, simulator):
    return provision("acme", simulator.url)


def estimate(text: str) -> int:
    request = CreateResponse.model_validate(orjson.loads(body(text)))
    return prompt_tokens(prepare_chat(request, limits=ModelLimits()))


def cancelled(key: str, text: str, marker: bytes) -> None:
    async def main() -> None:
        client = Client(scope(key))
        await client.send_body(body(text))
        await client.read_until(marker)
        await client.app.send_input({"type": "http.disconnect"})
        await client.app.wait(5)

    run(main())


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("long [[tokens:400]] [[rate:40]]", b'"response.output_text.delta"'),
        ("slow [[delay:8000]]", b"response.in_progress"),
    ],
    ids=["mid-stream", "before-the-first-token"],
)
def test_a_cancelled_request_counts_its_prompt_as_estimated_input(tenant, rows, text, marker):
    cancelled(tenant.key, text, marker)
    (row,) = rows
    assert row["status"] == 499
    assert row["input_tokens"] == estimate(text) > 0
    assert row["input_tokens_estimated"] is True


def test_a_completed_request_counts_the_reported_input(tenant, rows):
    async def main() -> Client:
        client = Client(scope(tenant.key))
        await client.send_body(body("hello there [[tokens:3]]"))
        await client.read_all()
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 200
    (row,) = rows
    # The simulator counts a word a token: "<user> hello there [[tokens:3]]".
    assert (row["input_tokens"], row["input_tokens_estimated"]) == (4, False)


def test_a_request_cancelled_before_it_was_read_has_no_estimate(tenant, rows):
    async def main() -> None:
        client = Client(scope(tenant.key))
        await client.send_body(body("never finished")[:10], more=True)
        await client.app.send_input({"type": "http.disconnect"})
        await client.app.wait(5)

    run(main())
    (row,) = rows
    assert row["status"] == 499
    assert (row["input_tokens"], row["input_tokens_estimated"]) == (0, False)


def test_a_request_cancelled_while_queued_has_no_estimate(provision, simulator, rows, monkeypatch):
    """Its prompt never reached a backend: nothing to count."""
    from responses_api.backends.routing import Router
    from responses_api.catalogue.services.backends import backend_ensure

    tenant = provision("acme", simulator.url)
    backend_ensure(
        organisation=tenant.organisation, name="sim", base_url=simulator.url, max_concurrency=1
    )
    waiting = asyncio.Event()
    next_release = Router._next_release

    def waits(self):
        waiting.set()  # a request found every slot taken and waits for one
        return next_release(self)

    monkeypatch.setattr(Router, "_next_release", waits)

    async def main() -> None:
        holder = Client(scope(tenant.key))
        await holder.send_body(body("hold [[tokens:200]] [[rate:40]]"))
        await holder.read_until(b'"response.output_text.delta"')
        queued = Client(scope(tenant.key))
        await queued.send_body(body("queued [[tokens:3]]"))
        await asyncio.wait_for(waiting.wait(), 10)
        await queued.app.send_input({"type": "http.disconnect"})
        await queued.app.wait(5)
        await holder.app.send_input({"type": "http.disconnect"})
        await holder.app.wait(5)

    run(main())
    queued_row, holder_row = rows
    assert queued_row["status"] == holder_row["status"] == 499
    assert queued_row["backend_id"] is None
    assert (queued_row["input_tokens"], queued_row["input_tokens_estimated"]) == (0, False)
    assert holder_row["input_tokens_estimated"] is True
