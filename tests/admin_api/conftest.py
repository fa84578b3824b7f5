"""Management API fixtures: an admin and a viewer key for Acme, an admin key
for Globex, and a little of everything in both organisations (the console's
``estates``: a backend, a model, an API key and a usage row each)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.console.conftest import as_user, crew, estates, usage_row  # noqa: F401

ADMIN = "/api/v1/admin"


@pytest.fixture
def admin_keys(crew):  # noqa: F811
    from accounts.admin_keys import admin_key_create

    acme_admin, acme_admin_raw = admin_key_create(
        organisation=crew["acme"], name="acme automation", role="admin"
    )
    _, acme_viewer_raw = admin_key_create(
        organisation=crew["acme"], name="acme reports", role="viewer"
    )
    _, globex_admin_raw = admin_key_create(
        organisation=crew["globex"], name="globex automation", role="admin"
    )
    return {
        "acme": acme_admin_raw,
        "acme_viewer": acme_viewer_raw,
        "globex": globex_admin_raw,
        "acme_key": acme_admin,
    }


@pytest.fixture
def api(admin_keys):
    """``api("acme")``: a DRF test client sending that admin key."""

    def client(name: str = "acme") -> APIClient:
        made = APIClient()
        made.credentials(HTTP_AUTHORIZATION=f"Bearer {admin_keys[name]}")
        return made

    return client


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert response["X-Request-Id"]
    return body["error"]


class Scim:
    """A SCIM client, as an identity provider calls ``/scim/v2/``: JSON in
    SCIM's media type, the admin key as a bearer token."""

    def __init__(self, raw_key: str | None) -> None:
        from django.test import Client

        self.client = Client()
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {raw_key}"} if raw_key else {}

    def get(self, path: str, params: dict | None = None):
        return self.client.get("/scim/v2" + path, params or {}, **self.headers)

    def _send(self, method: str, path: str, body, content_type: str):
        import json

        data = body if isinstance(body, str | bytes) else json.dumps(body)
        send = getattr(self.client, method)
        return send("/scim/v2" + path, data, content_type=content_type, **self.headers)

    def post(self, path: str, body, content_type: str = "application/scim+json"):
        return self._send("post", path, body, content_type)

    def put(self, path: str, body, content_type: str = "application/scim+json"):
        return self._send("put", path, body, content_type)

    def patch(self, path: str, body, content_type: str = "application/scim+json"):
        return self._send("patch", path, body, content_type)

    def delete(self, path: str):
        return self.client.delete("/scim/v2" + path, **self.headers)


@pytest.fixture
def scim_keys(crew):  # noqa: F811
    """Admin keys with the scim scope for Acme and Globex, created by their
    owners, and one for Acme without the scope."""
    from accounts.admin_keys import admin_key_create
    from accounts.audit import Actor

    made = {}
    for name, org, owner in (("acme", "acme", "alice"), ("globex", "globex", "charlie")):
        key, raw = admin_key_create(
            organisation=crew[org],
            name=f"{name} identity provider",
            role="admin",
            scopes=["scim"],
            actor=Actor.console(crew[owner]),
        )
        made[name], made[f"{name}_key"] = raw, key
    _, made["acme_plain"] = admin_key_create(
        organisation=crew["acme"], name="acme automation", role="admin"
    )
    _, made["acme_viewer"] = admin_key_create(
        organisation=crew["acme"], name="acme reader", role="viewer", scopes=["scim"]
    )
    return made


@pytest.fixture
def scim(scim_keys):
    """``scim("acme")``: a SCIM client with that key."""

    def client(name: str = "acme") -> Scim:
        return Scim(scim_keys[name])

    return client


def sso_with_rules(*, groups: str = "", domains: str = ""):
    """Single sign-on as ``SWITCHYARD_OIDC_GROUPS`` and ``_DOMAINS`` set it,
    the rules parsed by the parser settings use."""
    from accounts.oidc_rules import SsoConfig, rules_parse

    return SsoConfig(
        issuer="https://idp.example.test",
        client_id="switchyard",
        client_secret="",
        scopes="openid email profile",
        sign_algo="RS256",
        provider_name="Example ID",
        endpoints={},
        domain_rules=rules_parse(domains, variable="SWITCHYARD_OIDC_DOMAINS", lowercase_keys=True),
        group_rules=rules_parse(groups, variable="SWITCHYARD_OIDC_GROUPS"),
        groups_claim="groups",
        create_users=True,
        require_verified_email=True,
        timeout=10.0,
    )


@pytest.fixture
def sign_in_rules(settings):
    """Single sign-on configured, with the group rules SCIM groups follow."""
    settings.SWITCHYARD_SSO = sso_with_rules(
        groups="Acme Admins=acme:admin,Acme Developers=acme:developer,"
        "Acme Owners=acme:owner,Globex Admins=globex:admin"
    )
    return settings.SWITCHYARD_SSO


def scim_error_of(response, status: int, scim_type: str | None = None) -> dict:
    """The SCIM error body (RFC 7644, 3.12) of ``response``."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/scim+json")
    body = response.json()
    assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"], body
    assert body["status"] == str(status)
    assert body["detail"]
    if scim_type is not None:
        assert body.get("scimType") == scim_type, body
    return body
