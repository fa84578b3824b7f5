"""Deprovisioning over SCIM: the membership ends, console sessions end (a
signed-in browser is signed out), the keys the person created are revoked,
or handed to the first owner under SWITCHYARD_SCIM_DEPROVISION_KEYS=transfer,
each step in the audit log under the SCIM key."""

from __future__ import annotations

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from accounts.models import AdminApiKey, ApiKey, AuditEntry, Membership

pytestmark = pytest.mark.django_db

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
DEACTIVATE = {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "value": {"active": False}}]}


@pytest.fixture
def bob_provisioned(scim, crew):
    """Bob, a developer of Acme, taken over by Acme's provider, signed in
    to the console, with an inference key and an admin key he made."""
    from accounts.admin_keys import admin_key_create
    from accounts.audit import Actor
    from accounts.services.api_keys import api_key_create

    created = scim("acme").post(
        "/Users",
        {"userName": "bob@example.com", "emails": [{"value": "bob@example.com", "primary": True}]},
    )
    assert created.status_code == 201, created.content
    key, raw = api_key_create(
        organisation=crew["acme"], name="bob's laptop", actor=Actor.console(crew["bob"])
    )
    admin_key, admin_raw = admin_key_create(
        organisation=crew["acme"], name="bob's script", actor=Actor.console(crew["bob"])
    )
    browser = Client()
    assert browser.login(username="bob@example.com", password="bob-password-1")
    assert browser.get("/console/").status_code == 200
    # Bob's key in Globex, should he have one, is no business of Acme's.
    other, _ = api_key_create(
        organisation=crew["globex"], name="bob elsewhere", created_by=crew["bob"]
    )
    return {
        "id": created.json()["id"],
        "key": key,
        "raw": raw,
        "admin_key": admin_key,
        "admin_raw": admin_raw,
        "browser": browser,
        "other": other,
    }


def signed_out(browser: Client) -> bool:
    response = browser.get("/console/")
    return response.status_code == 302 and "/console/login/" in response["Location"]


def test_deactivation_signs_out_and_revokes_keys(scim, crew, bob_provisioned, scim_keys):
    assert Membership.objects.get(user=crew["bob"], organisation=crew["acme"]).role == "developer"
    response = scim("acme").patch(f"/Users/{bob_provisioned['id']}", DEACTIVATE)
    assert response.status_code == 200, response.content
    assert not Membership.objects.filter(user=crew["bob"], organisation=crew["acme"]).exists()
    assert signed_out(bob_provisioned["browser"])
    assert not any(
        s.get_decoded().get("_auth_user_id") == str(crew["bob"].pk) for s in Session.objects.all()
    )
    assert ApiKey.objects.get(pk=bob_provisioned["key"].pk).status == "revoked"
    assert AdminApiKey.objects.get(pk=bob_provisioned["admin_key"].pk).status == "revoked"
    assert ApiKey.objects.get(pk=bob_provisioned["other"].pk).status == "active"

    entries = AuditEntry.objects.filter(organisation=crew["acme"], source="scim").order_by("id")
    tail = [(e.action, e.admin_key_id) for e in entries][-5:]
    assert [action for action, _ in tail] == [
        "scim.user_update",
        "member.remove",
        "api_key.revoke",
        "admin_key.revoke",
        "member.sessions_revoke",
    ]
    assert {key for _, key in tail} == {scim_keys["acme_key"].id}
    assert entries.last().details == {"sessions": 1}


def test_the_management_api_refuses_the_leavers_admin_key(scim, bob_provisioned):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {bob_provisioned['admin_raw']}"}
    assert Client().get("/api/v1/admin/me", **headers).status_code == 200
    scim("acme").delete(f"/Users/{bob_provisioned['id']}")
    assert Client().get("/api/v1/admin/me", **headers).status_code == 401


def test_delete_deprovisions_too(scim, crew, bob_provisioned):
    assert scim("acme").delete(f"/Users/{bob_provisioned['id']}").status_code == 204
    assert not Membership.objects.filter(user=crew["bob"], organisation=crew["acme"]).exists()
    assert signed_out(bob_provisioned["browser"])
    assert ApiKey.objects.get(pk=bob_provisioned["key"].pk).status == "revoked"
    # The account stays (it may belong elsewhere), out of Acme.
    crew["bob"].refresh_from_db()
    assert crew["bob"].is_active


def test_transfer_hands_keys_to_the_first_owner(scim, crew, bob_provisioned, settings):
    settings.SWITCHYARD_SCIM_DEPROVISION_KEYS = "transfer"
    assert scim("acme").patch(f"/Users/{bob_provisioned['id']}", DEACTIVATE).status_code == 200
    key = ApiKey.objects.get(pk=bob_provisioned["key"].pk)
    admin_key = AdminApiKey.objects.get(pk=bob_provisioned["admin_key"].pk)
    assert key.status == admin_key.status == "active"
    assert key.created_by == admin_key.created_by == crew["alice"]
    transfers = AuditEntry.objects.filter(
        organisation=crew["acme"], source="scim", action__endswith=".transfer"
    )
    assert sorted((e.action, e.details["from"], e.details["to"]) for e in transfers) == [
        ("admin_key.transfer", "bob@example.com", "alice@example.com"),
        ("api_key.transfer", "bob@example.com", "alice@example.com"),
    ]
    assert signed_out(bob_provisioned["browser"])


def test_an_owner_is_not_deprovisioned_by_a_scim_key(scim, crew):
    """Only an owner removes an owner; the SCIM key is an admin key."""
    okta = scim("acme")
    alice = okta.post("/Users", {"userName": "alice@example.com"}).json()
    response = okta.patch(f"/Users/{alice['id']}", DEACTIVATE)
    assert response.status_code == 403
    assert response.json()["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
    assert Membership.objects.get(user=crew["alice"], organisation=crew["acme"]).role == "owner"
    assert okta.get(f"/Users/{alice['id']}").json()["active"] is True


def test_sign_in_does_not_bring_back_a_deprovisioned_person(scim, crew, bob_provisioned, settings):
    """A domain rule would add Bob at his next sign-in; his provider said no."""
    from accounts.oidc import sso_sign_in
    from tests.admin_api.conftest import sso_with_rules

    settings.SWITCHYARD_SSO = sso_with_rules(
        domains="example.com=acme:developer,example.com=globex:viewer"
    )
    scim("acme").patch(f"/Users/{bob_provisioned['id']}", DEACTIVATE)
    sso_sign_in(claims={"email": "bob@example.com", "email_verified": True})
    assert not Membership.objects.filter(user=crew["bob"], organisation=crew["acme"]).exists()
    assert Membership.objects.filter(user=crew["bob"], organisation=crew["globex"]).exists()
