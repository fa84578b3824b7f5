"""SCIM through the ASGI application, as a provider reaches it: the
``/scim/v2/`` prefix is Django's (not the inference API's route table), and
deprovisioning a person stops the inference key they made on /v1/responses."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support import wait_until

pytestmark = pytest.mark.django_db

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


@pytest.fixture
def provider(gateway, people):
    from accounts.admin_keys import admin_key_create

    _, raw = admin_key_create(
        organisation=people["acme"], name="okta", role="admin", scopes=["scim"]
    )
    client = httpx.Client(
        transport=gateway.transport,
        base_url=gateway.url + "/scim/v2",
        headers={"Authorization": f"Bearer {raw}", "Content-Type": "application/scim+json"},
        timeout=30,
    )
    yield client
    client.close()


def _served(sdk: openai.OpenAI) -> str | None:
    try:
        return sdk.responses.create(model="sim-model", input="Hi").output_text
    except openai.NotFoundError:
        return None  # the catalogue cache has not seen the model yet


def test_deactivating_over_scim_stops_the_leavers_key(provider, gateway, people, local_simulator):
    from accounts.audit import Actor
    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    backend, _ = backend_ensure(
        organisation=people["acme"], name="sim", base_url=local_simulator.url
    )
    model_ensure(organisation=people["acme"], public_id="sim-model", backend=backend)
    found = provider.get("/Users", params={"filter": 'userName eq "bob@example.com"'})
    assert found.status_code == 200, found.text
    assert found.headers["content-type"].startswith("application/scim+json")
    assert found.json()["totalResults"] == 0
    bob = provider.post("/Users", json={"userName": "bob@example.com"}).json()
    _, raw = api_key_create(
        organisation=people["acme"], name="bob's key", actor=Actor.console(people["bob"])
    )
    sdk = gateway.openai(raw)
    assert wait_until(lambda: _served(sdk), timeout=10)

    deactivate = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "replace", "value": {"active": False}}],
    }
    response = provider.patch(f"/Users/{bob['id']}", json=deactivate)
    assert response.status_code == 200, response.text
    with pytest.raises(openai.AuthenticationError):
        sdk.responses.create(model="sim-model", input="Hi")
    # Still nothing of the inference API's under /scim: an unknown SCIM path
    # is SCIM's 404.
    missing = provider.get("/Bulk")
    assert missing.status_code == 404
    assert missing.json()["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
