"""Responses that end together are stored together: one thread hop and one
commit for the group, and one response that cannot be written costs only
itself."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from responses_api import continuation, store
from responses_api.models import StoredItem, StoredResponse

pytestmark = pytest.mark.django_db(transaction=True)


def _keep(org, body: bytes | None = None) -> continuation.Keep:
    return continuation.Keep(
        organisation_id=org.id,
        ttl_hours=1,
        body=body or orjson.dumps({"model": "m", "input": [{"role": "user", "content": "hi"}]}),
        instructions=None,
        previous=None,
        references={},
        affinity="",
    )


def _response(n: int) -> dict:
    return {"id": f"resp_group_{n}", "object": "response", "output": [{"id": f"msg_group_{n}"}]}


def test_concurrent_saves_share_commits_and_each_is_kept(people, monkeypatch):
    acme = people["acme"]
    groups: list[int] = []
    insert = store.responses_insert

    def counted(entries):
        groups.append(len(entries))
        insert(entries)

    monkeypatch.setattr(store, "responses_insert", counted)

    async def main() -> None:
        await asyncio.gather(*(_keep(acme).save(_response(n)) for n in range(40)))

    asyncio.run(main())
    assert StoredResponse.objects.filter(organisation=acme).count() == 40
    assert StoredItem.objects.filter(organisation=acme).count() == 80  # input + output ids
    assert sum(groups) == 40 and len(groups) < 40, groups


def test_one_response_that_cannot_be_written_costs_only_itself(people, caplog):
    acme = people["acme"]

    async def main() -> None:
        broken = _keep(acme, body=b"not json")
        await asyncio.gather(
            *(_keep(acme).save(_response(n)) for n in range(5)),
            broken.save(_response(99)),
        )

    asyncio.run(main())
    kept = set(StoredResponse.objects.filter(organisation=acme).values_list("id", flat=True))
    assert kept == {f"resp_group_{n}" for n in range(5)}
    assert "resp_group_99 could not be stored" in caplog.text
