"""A client that leaves while its embeddings are computed, at the ASGI
boundary: one usage row, status 499, with the prompt's estimate counted."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from responses_api.catalogue import catalog
from responses_api.pipeline import exchange as exchange_module
from tests.api.test_consumer import Client, run, scope

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def rows(monkeypatch) -> list[dict[str, Any]]:
    handed: list[dict[str, Any]] = []

    class Sink:
        def submit(self, row: dict[str, Any], scripts=(), then=()):
            handed.append(row)

    monkeypatch.setattr(exchange_module, "sink", Sink())
    return handed


def test_a_client_gone_while_the_backend_embeds_leaves_one_499_row(embed_tenant, rows):
    catalog.forget()
    tenant = embed_tenant()
    request = {"model": "embed-model", "input": ["slow text [[delay:3000]]", "more"]}

    async def main() -> None:
        client = Client(scope(tenant.key, path="/v1/embeddings"))
        await client.send_body(orjson.dumps(request))
        await asyncio.sleep(0.5)
        await client.app.send_input({"type": "http.disconnect"})
        await client.app.wait(5)

    run(main())
    [row] = rows
    assert (row["status"], row["endpoint"], row["note"]) == (
        499,
        "/embeddings",
        "Client disconnected",
    )
    assert row["backend_name"] == "sim"
    assert row["input_tokens"] > 0 and row["input_tokens_estimated"]
