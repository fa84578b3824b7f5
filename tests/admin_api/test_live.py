"""The management API served by the ASGI application beside the inference
API, in-process: a key made
through it serves /v1/responses, its request is found in the usage log, a
revocation through it holds, and neither kind of key opens the other API."""

from __future__ import annotations

import csv
import io
import time

import httpx
import openai
import pytest

from tests.support import wait_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(gateway, people):
    from accounts.admin_keys import admin_key_create

    _, raw = admin_key_create(organisation=people["acme"], name="live", role="admin")
    client = httpx.Client(
        transport=gateway.transport,
        base_url=gateway.url + "/api/v1/admin",
        headers={"Authorization": f"Bearer {raw}"},
        timeout=30,
    )
    yield client, raw
    client.close()


def test_a_key_made_through_the_api_serves_responses_until_revoked(admin, gateway, local_simulator):
    client, _ = admin
    backend = client.post("/backends", json={"name": "sim", "base_url": local_simulator.url})
    assert backend.status_code == 201, backend.text
    model = client.post(
        "/models",
        json={
            "public_id": "sim-model",
            "deployments": [{"backend": backend.json()["id"], "upstream_name": "sim-model"}],
        },
    )
    assert model.status_code == 201, model.text
    created = client.post("/keys", json={"name": "from the api"}).json()

    sdk = gateway.openai(created["key"])
    raw = wait_until(
        lambda: _try(lambda: sdk.responses.with_raw_response.create(model="sim-model", input="Hi")),
        timeout=10,
    )
    request_id = raw.headers["x-request-id"]
    assert raw.parse().output_text

    def logged():
        page = client.get("/usage", params={"request_id": request_id}).json()
        return page["data"]

    rows = wait_until(logged, timeout=30)
    assert rows[0]["id"] == request_id and rows[0]["key_id"] == created["id"]
    assert rows[0]["status"] == 200 and rows[0]["model"] == "sim-model"
    exported = client.get("/usage", params={"format": "csv", "request_id": request_id})
    assert exported.headers["content-type"].startswith("text/csv")
    assert [r["request_id"] for r in csv.DictReader(io.StringIO(exported.text))] == [request_id]
    # And counted in the summary, grouped by key, from the roll-ups.
    now = int(time.time())
    summary = client.get(
        "/usage/summary",
        params={
            "start_time": now - 3600,
            "end_time": now + 60,
            "bucket_width": "1h",
            "group_by": "key",
        },
    ).json()
    mine = [r for b in summary["data"] for r in b["results"] if r["api_key_id"] == created["id"]]
    assert sum(r["requests"] for r in mine) == 1, summary

    assert client.delete(f"/keys/{created['id']}").json()["status"] == "revoked"

    def refused() -> bool:
        try:
            sdk.responses.create(model="sim-model", input="Hi")
        except openai.AuthenticationError:
            return True
        return False

    wait_until(refused, timeout=10)


def _try(call):
    try:
        return call()
    except openai.NotFoundError:
        return None  # the catalogue cache has not seen the new model yet


@pytest.mark.parametrize("path", ["/v1/responses", "/api/v1/responses"])
def test_an_admin_key_is_a_401_on_the_inference_api(admin, gateway, path):
    _, raw = admin
    response = gateway.http.post(
        path,
        headers={"Authorization": f"Bearer {raw}"},
        json={"model": "sim-model", "input": "Hi"},
        timeout=10,
    )
    assert response.status_code == 401 and response.headers["x-request-id"]
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_an_inference_key_is_a_401_on_the_management_api(gateway, provision, local_simulator):
    acme = provision("acme", local_simulator.url)
    response = gateway.http.get(
        "/api/v1/admin/organisation",
        headers={"Authorization": f"Bearer {acme.key}"},
        timeout=10,
    )
    assert response.status_code == 401 and response.headers["x-request-id"]
    assert response.json()["error"]["type"] == "authentication_error"


def test_only_the_api_v1_admin_prefix_reaches_django(gateway):
    # /v1/admin/… is the inference API's: its own 404, not the management API.
    inference = gateway.http.get("/v1/admin/keys", timeout=10)
    assert inference.status_code == 404
    assert "See /api/v1/docs" in inference.json()["error"]["message"]
    management = gateway.http.get("/api/v1/admin/keys", timeout=10)
    assert management.status_code == 401
    unknown = gateway.http.get("/api/v1/admin/nowhere", timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_url"


def test_the_schema_and_docs_are_served_and_work_offline(gateway):
    document = gateway.http.get("/api/v1/admin/openapi.json", timeout=10).json()
    assert document["openapi"].startswith("3.")
    assert {"/keys/", "/backends/{id}/check/", "/usage/", "/organisation/"} <= set(
        document["paths"]
    )
    page = gateway.http.get("/api/v1/admin/docs/", timeout=10)
    assert page.status_code == 200
    assert 'data-schema="/api/v1/admin/openapi.json"' in page.text
    assert "https://" not in page.text and "http://" not in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "init.js"):
        start = page.text.index("/static/")
        assert asset in page.text[start:]
