"""Okta's SCIM 2.0 provisioning, replayed request by request as Okta's
public documentation shows them ("SCIM 2.0 protocol reference",
developer.okta.com/docs/api/openapi/okta-scim/guides/scim-20): look the
user up with ``filter=userName eq``, create them, read them, replace their
profile with PUT, deactivate with a path-less PATCH; push a group, rename it
with its id repeated, add and remove members, delete it."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry, Membership, ScimGroup, ScimUser

pytestmark = pytest.mark.django_db

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"


def okta_user(user_name: str, **overrides) -> dict:
    """The body of Okta's POST /Users (password and locale included: Okta
    sends them, Switchyard ignores them)."""
    return {
        "schemas": [USER],
        "userName": user_name,
        "name": {"givenName": "Test", "familyName": "User"},
        "emails": [{"primary": True, "value": user_name, "type": "work"}],
        "displayName": "Test User",
        "locale": "en-US",
        "externalId": "00ujl29u0le5T6Aj10h7",
        "groups": [],
        "password": "1mz050nq",
        "active": True,
        **overrides,
    }


def test_okta_create_user_flow_makes_a_member(scim, crew, scim_keys):
    """Okta's create: filter finds nobody, POST makes the account and the
    membership (a viewer: no rule names Acme), GET and the filter find them."""
    okta = scim("acme")
    search = {"filter": 'userName eq "test.user@okta.local"', "startIndex": "1", "count": "100"}
    empty = okta.get("/Users", search)
    assert empty.status_code == 200
    assert empty["Content-Type"].startswith("application/scim+json")
    assert empty.json() == {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        "totalResults": 0,
        "startIndex": 1,
        "itemsPerPage": 0,
        "Resources": [],
    }

    created = okta.post("/Users", okta_user("test.user@okta.local"))
    assert created.status_code == 201, created.content
    user = created.json()
    assert created["Location"] == user["meta"]["location"]
    assert user["userName"] == "test.user@okta.local"
    assert user["active"] is True
    assert user["externalId"] == "00ujl29u0le5T6Aj10h7"
    assert user["name"]["givenName"] == "Test"
    member = Membership.objects.get(user__username="test.user@okta.local")
    assert member.organisation == crew["acme"] and member.role == "viewer"
    assert not member.user.has_usable_password()  # Okta's password is not kept

    found = okta.get("/Users", search).json()
    assert found["totalResults"] == 1 and found["Resources"][0]["id"] == user["id"]
    assert okta.get(f"/Users/{user['id']}").json()["userName"] == "test.user@okta.local"

    entries = AuditEntry.objects.filter(organisation=crew["acme"], source="scim")
    assert {e.action for e in entries} == {"scim.user_create", "member.add"}
    assert {e.admin_key_id for e in entries} == {scim_keys["acme_key"].id}
    assert "1mz050nq" not in str(list(entries.values_list("details", flat=True)))


def test_okta_put_replaces_the_profile(scim):
    okta = scim("acme")
    user = okta.post("/Users", okta_user("test.user@okta.local")).json()
    replaced = okta.put(
        f"/Users/{user['id']}",
        {
            **user,
            "name": {"givenName": "Another", "familyName": "Name"},
            "externalId": "00ujl29u0le5T6Aj10h8",
            "password": "t1meMa$heen",
        },
    )
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["name"]["givenName"] == "Another"
    row = ScimUser.objects.get(id=user["id"])
    assert (row.given_name, row.family_name, row.external_id) == (
        "Another",
        "Name",
        "00ujl29u0le5T6Aj10h8",
    )


def test_okta_deactivate_ends_the_membership_and_reactivate_restores_it(scim, crew):
    okta = scim("acme")
    user = okta.post("/Users", okta_user("test.user@okta.local")).json()
    deactivate = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "replace", "value": {"active": False}}],
    }
    response = okta.patch(f"/Users/{user['id']}", deactivate)
    assert response.status_code == 200, response.content
    assert response.json()["active"] is False
    assert not Membership.objects.filter(user__username="test.user@okta.local").exists()
    # Still provisioned, inactive: Okta reads and may reactivate them.
    assert okta.get(f"/Users/{user['id']}").json()["active"] is False
    actions = list(
        AuditEntry.objects.filter(organisation=crew["acme"], source="scim")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions[-3:] == ["scim.user_update", "member.remove", "member.sessions_revoke"]
    update = AuditEntry.objects.filter(action="scim.user_update").get()
    assert update.details["changed"] == {"active": [True, False]}

    reactivate = {
        "schemas": [PATCH_OP],
        "Operations": [{"op": "replace", "value": {"active": True}}],
    }
    assert okta.patch(f"/Users/{user['id']}", reactivate).json()["active"] is True
    assert Membership.objects.filter(user__username="test.user@okta.local").exists()


def test_okta_group_push_maps_to_roles_by_the_sign_in_rules(scim, crew, sign_in_rules):
    """Okta's group push: POST the group, PATCH its name (Okta repeats the
    id), add members, remove one with ``members[value eq "…"]``, delete.
    "Acme Admins" is ``acme:admin`` in SWITCHYARD_OIDC_GROUPS."""
    okta = scim("acme")
    one = okta.post("/Users", okta_user("one@okta.local")).json()
    two = okta.post("/Users", okta_user("two@okta.local", externalId="00u2")).json()
    # Rules name Acme, and no group gives these two a role yet: viewers.
    assert Membership.objects.get(user__username="one@okta.local").role == "viewer"

    pushed = okta.post("/Groups", {"schemas": [GROUP], "displayName": "Test SCIMv2", "members": []})
    assert pushed.status_code == 201, pushed.content
    group = pushed.json()
    renamed = okta.patch(
        f"/Groups/{group['id']}",
        {
            "schemas": [PATCH_OP],
            "Operations": [
                {"op": "replace", "value": {"id": group["id"], "displayName": "Acme Admins"}}
            ],
        },
    )
    assert renamed.status_code == 200, renamed.content
    assert ScimGroup.objects.get(id=group["id"]).display_name == "Acme Admins"

    added = okta.patch(
        f"/Groups/{group['id']}",
        {
            "schemas": [PATCH_OP],
            "Operations": [
                {
                    "op": "add",
                    "path": "members",
                    "value": [
                        {"value": one["id"], "display": "one@okta.local"},
                        {"value": two["id"], "display": "two@okta.local"},
                    ],
                }
            ],
        },
    )
    assert added.status_code == 200, added.content
    assert {m["value"] for m in added.json()["members"]} == {one["id"], two["id"]}
    roles = dict(
        Membership.objects.filter(organisation=crew["acme"]).values_list("user__username", "role")
    )
    assert roles["one@okta.local"] == roles["two@okta.local"] == "admin"

    removed = okta.patch(
        f"/Groups/{group['id']}",
        {
            "schemas": [PATCH_OP],
            "Operations": [{"op": "remove", "path": f'members[value eq "{two["id"]}"]'}],
        },
    )
    assert [m["value"] for m in removed.json()["members"]] == [one["id"]]
    assert Membership.objects.get(user__username="two@okta.local").role == "viewer"
    assert okta.get(f"/Users/{one['id']}").json()["groups"][0]["display"] == "Acme Admins"

    assert okta.delete(f"/Groups/{group['id']}").status_code == 204
    assert Membership.objects.get(user__username="one@okta.local").role == "viewer"
    assert okta.get(f"/Groups/{group['id']}").status_code == 404
    actions = set(
        AuditEntry.objects.filter(organisation=crew["acme"], source="scim").values_list(
            "action", flat=True
        )
    )
    assert {"scim.group_create", "scim.group_update", "scim.group_delete", "member.role"} <= actions


def test_a_rule_naming_owner_grants_admin_over_scim(scim, sign_in_rules):
    """Only an owner makes an owner: a SCIM key is an admin key."""
    okta = scim("acme")
    user = okta.post("/Users", okta_user("boss@okta.local")).json()
    okta.post("/Groups", {"displayName": "Acme Owners", "members": [{"value": user["id"]}]})
    assert Membership.objects.get(user__username="boss@okta.local").role == "admin"


def test_okta_list_pages_with_start_index_and_count(scim):
    okta = scim("acme")
    ids = [
        okta.post("/Users", okta_user(f"p{n}@okta.local", externalId=f"x{n}")).json()["id"]
        for n in range(5)
    ]
    page = okta.get("/Users", {"startIndex": "2", "count": "2"}).json()
    assert page["totalResults"] == 5 and page["startIndex"] == 2 and page["itemsPerPage"] == 2
    assert [r["id"] for r in page["Resources"]] == ids[1:3]
    assert okta.get("/Users", {"startIndex": "0", "count": "-4"}).json()["Resources"] == []
