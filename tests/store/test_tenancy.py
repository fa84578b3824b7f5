"""Another organisation's stored response is indistinguishable from one
that never existed, was deleted, or has expired: the same status and the
same bytes, for every way of naming it."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from responses_api.models import StoredResponse
from tests.inprocess import Gateway

pytestmark = pytest.mark.django_db(transaction=True)


def asks(
    gateway: Gateway, key: str, response_id: str, item_id: str, path_id: str | None = None
) -> list[httpx.Response]:
    """Each way of naming a response or an item: by path (``path_id``, the
    id as a URL holds it, by default ``response_id``) and in a request."""
    path_id = response_id if path_id is None else path_id
    headers = {"authorization": f"Bearer {key}"}
    with httpx.Client(
        transport=gateway.transport, base_url=gateway.url, headers=headers, timeout=30
    ) as http:
        return [
            http.get(f"/v1/responses/{path_id}"),
            http.get(f"/api/v1/responses/{path_id}/input_items"),
            http.post(
                "/v1/responses",
                json={"model": "sim-model", "input": "x", "previous_response_id": response_id},
            ),
            http.post(
                "/v1/responses",
                json={
                    "model": "sim-model",
                    "input": [
                        {"role": "user", "content": "x"},
                        {"type": "item_reference", "id": item_id},
                    ],
                },
            ),
            http.delete(f"/v1/responses/{path_id}"),
        ]


def _answers(replies: list[httpx.Response]) -> list[tuple[int, bytes, list]]:
    return [
        (r.status_code, r.content, sorted(h for h in r.headers.items() if h[0] != "x-request-id"))
        for r in replies
    ]


def test_another_organisations_ids_get_the_answers_of_missing_ones(gateway, acme, globex, client):
    first = client.responses.create(model="sim-model", input="[[text:secret]] mine")
    item_id = first.output[0].id
    others = _answers(asks(gateway, globex.key, first.id, item_id))
    assert [status for status, _, _ in others] == [404, 404, 400, 400, 404]
    assert b"previous_response_not_found" in others[2][1] and b"input[1]" in others[3][1]

    # Acme itself, once the response has expired (not yet purged) ...
    StoredResponse.objects.filter(id=first.id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    expired = _answers(asks(gateway, acme.key, first.id, item_id))
    # ... and once it is deleted outright.
    StoredResponse.objects.filter(id=first.id).update(
        expires_at=timezone.now() + timedelta(hours=1)
    )
    client.responses.delete(first.id)
    deleted = _answers(asks(gateway, acme.key, first.id, item_id))
    assert others == expired == deleted
    # Globex's own never-existing ids answer the same way too.
    never = _answers(asks(gateway, globex.key, first.id, item_id))
    assert never == others
    # Globex's refused attempts stored nothing.
    assert not StoredResponse.objects.filter(organisation=globex.organisation).exists()


def test_a_zdr_organisation_stores_nothing_and_says_so(gateway, initech, recorder):
    headers = {"authorization": f"Bearer {initech.key}"}
    with httpx.Client(
        transport=gateway.transport, base_url=gateway.url, headers=headers, timeout=30
    ) as http:
        created = http.post("/v1/responses", json={"model": "sim-model", "input": "x"})
        body = created.json()
        assert created.status_code == 200 and body["store"] is False
        assert [n["code"] for n in body["switchyard"]["notices"]] == []
        ignored = http.post(
            "/v1/responses", json={"model": "sim-model", "input": "x", "store": True}
        )
        assert "store_ignored" in [n["code"] for n in ignored.json()["switchyard"]["notices"]]
        got = http.get(f"/v1/responses/{body['id']}")
        assert got.status_code == 404 and "zero data retention" in got.json()["error"]["message"]
        chained = http.post(
            "/v1/responses",
            json={"model": "sim-model", "input": "x", "previous_response_id": body["id"]},
        )
        assert chained.status_code == 400
        assert "stores nothing" in chained.json()["error"]["message"]
        referenced = http.post(
            "/v1/responses",
            json={"model": "sim-model", "input": [{"type": "item_reference", "id": "msg_1"}]},
        )
        assert referenced.status_code == 400
        assert referenced.json()["error"]["param"] == "input[0]"
    assert not StoredResponse.objects.exists()
