"""What a request records on its exchange, at the ASGI boundary: the
backend's usage is recorded once, when the relay ends, whether the caller
has rate limits (which settle on it) or not, streamed or not."""

from __future__ import annotations

import pytest

from responses_api.pipeline.exchange import Exchange
from tests.api.test_consumer import Client, body, run, scope

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "json"])
@pytest.mark.parametrize("limits", [{}, {"rpm": 1000, "tpm": 1_000_000}], ids=["free", "limited"])
def test_the_usage_of_an_answer_is_recorded_once(
    provision, simulator, rows, monkeypatch, stream, limits
):
    tenant = provision("acme", simulator.url, **limits)
    calls: list[int] = []
    real = Exchange.produced

    def counted(self, usage, first_token_at):
        calls.append(usage.output_tokens)
        real(self, usage, first_token_at)

    monkeypatch.setattr(Exchange, "produced", counted)

    async def main() -> Client:
        client = Client(scope(tenant.key))
        await client.send_body(body("hi [[tokens:5]]", stream=stream))
        await client.read_all()
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 200
    assert (client.header(b"x-ratelimit-limit-requests") is not None) == bool(limits)
    assert calls == [5]
    assert [(r["status"], r["output_tokens"]) for r in rows] == [(200, 5)]
    assert rows[0]["ttft_ms"] is not None
