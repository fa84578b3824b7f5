"""Entra ID's SCIM provisioning, replayed as Microsoft's public
documentation shows its requests ("Tutorial: Develop and plan provisioning
for a SCIM endpoint in Microsoft Entra ID", learn.microsoft.com): the
userName filter, a create with the enterprise extension, PATCH with paths
such as ``emails[type eq "work"].value``, the path-less form, ``"False"`` as
a string, and groups looked up with ``excludedAttributes=members``, renamed,
and given and relieved of members."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry, Membership, ScimGroup, ScimUser

pytestmark = pytest.mark.django_db

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


def entra_user(user_name: str, email: str) -> dict:
    return {
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User", ENTERPRISE],
        "externalId": "0a21f0f2-8d2a-4f8e-bf98-7b2d8f8a8f7b",
        "userName": user_name,
        "active": True,
        "emails": [{"primary": True, "type": "work", "value": email}],
        "meta": {"resourceType": "User"},
        "name": {
            "formatted": "givenName familyName",
            "familyName": "familyName",
            "givenName": "givenName",
        },
        "roles": [],
        ENTERPRISE: {"department": "Research", "employeeNumber": "42"},
    }


def patch(*operations: dict) -> dict:
    return {"schemas": [PATCH_OP], "Operations": list(operations)}


def test_entra_user_lifecycle(scim, crew):
    """userName need not be an address: the account is the work e-mail's."""
    entra = scim("acme")
    user_name = "Test_User_ab6490ee-1e48-479e-a20b-2d77186b5dd1"
    lookup = {"filter": f'userName eq "{user_name}"'}
    assert entra.get("/Users", lookup).json()["totalResults"] == 0
    created = entra.post("/Users", entra_user(user_name, "Test_User_fd0ea19b@testuser.com"))
    assert created.status_code == 201, created.content
    user = created.json()
    assert entra.get("/Users", lookup).json()["Resources"][0]["id"] == user["id"]
    assert Membership.objects.filter(
        organisation=crew["acme"], user__email="test_user_fd0ea19b@testuser.com"
    ).exists()

    updated = entra.patch(
        f"/Users/{user['id']}",
        patch(
            {
                "op": "Replace",
                "path": 'emails[type eq "work"].value',
                "value": "updated@testuser.com",
            },
            {"op": "Replace", "path": "name.familyName", "value": "updatedFamilyName"},
            {"op": "Add", "path": f"{ENTERPRISE}:department", "value": "Sales"},
            {"op": "Replace", "path": "title", "value": "Engineer"},
            {"op": "Add", "path": 'phoneNumbers[type eq "work"].value', "value": "+1 555 0100"},
            {"op": "Add", "path": 'addresses[type eq "work"].locality', "value": "Redmond"},
        ),
    )
    assert updated.status_code == 200, updated.content
    assert updated.json()["emails"][0]["value"] == "updated@testuser.com"
    row = ScimUser.objects.select_related("user").get(id=user["id"])
    assert row.family_name == "updatedFamilyName"
    assert row.user.email == row.user.username == "updated@testuser.com"

    renamed = entra.patch(
        f"/Users/{user['id']}",
        patch({"op": "Replace", "path": "userName", "value": "renamed@contoso.com"}),
    )
    assert renamed.json()["userName"] == "renamed@contoso.com"

    # Path-less, with the boolean as a string: Entra's own form.
    disabled = entra.patch(
        f"/Users/{user['id']}", patch({"op": "Replace", "value": {"active": "False"}})
    )
    assert disabled.status_code == 200, disabled.content
    assert disabled.json()["active"] is False
    assert not Membership.objects.filter(organisation=crew["acme"], user=row.user).exists()

    enabled = entra.patch(
        f"/Users/{user['id']}", patch({"op": "Replace", "path": "active", "value": "True"})
    )
    assert enabled.json()["active"] is True
    assert Membership.objects.filter(organisation=crew["acme"], user=row.user).exists()

    assert entra.delete(f"/Users/{user['id']}").status_code == 204
    assert entra.get(f"/Users/{user['id']}").status_code == 404
    assert not Membership.objects.filter(organisation=crew["acme"], user=row.user).exists()
    assert AuditEntry.objects.filter(
        organisation=crew["acme"], source="scim", action="scim.user_delete"
    ).exists()


def test_entra_path_less_add_with_attribute_paths_as_keys(scim):
    entra = scim("acme")
    user = entra.post("/Users", entra_user("pathless@contoso.com", "pathless@contoso.com")).json()
    response = entra.patch(
        f"/Users/{user['id']}",
        patch(
            {
                "op": "Add",
                "value": {
                    "displayName": "Path Less",
                    "name.givenName": "Path",
                    'emails[type eq "work"].value': "pathless@contoso.com",
                    "externalId": "ext-9",
                },
            }
        ),
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["displayName"], body["name"]["givenName"], body["externalId"]) == (
        "Path Less",
        "Path",
        "ext-9",
    )


def test_entra_group_membership_changes_follow_the_rules(scim, crew, sign_in_rules):
    """ "Acme Developers" is ``acme:developer``, "Acme Admins" ``acme:admin``;
    a person in both has the higher role, as at sign-in."""
    entra = scim("acme")
    ada = entra.post("/Users", entra_user("ada@contoso.com", "ada@contoso.com")).json()
    created = entra.post(
        "/Groups",
        {
            "schemas": [
                "urn:ietf:params:scim:schemas:core:2.0:Group",
                "http://schemas.microsoft.com/2006/11/ResourceManagement/ADSCIM/2.0/Group",
            ],
            "externalId": "8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159",
            "displayName": "Acme Developers",
            "meta": {"resourceType": "Group"},
        },
    )
    assert created.status_code == 201, created.content
    developers = created.json()["id"]
    admins = entra.post("/Groups", {"displayName": "Staff"}).json()["id"]

    listed = entra.get(
        "/Groups", {"excludedAttributes": "members", "filter": 'displayName eq "Acme Developers"'}
    ).json()
    assert listed["totalResults"] == 1
    assert "members" not in listed["Resources"][0]

    def role() -> str:
        return Membership.objects.get(
            organisation=crew["acme"], user__username="ada@contoso.com"
        ).role

    add = patch({"op": "Add", "path": "members", "value": [{"$ref": None, "value": ada["id"]}]})
    assert entra.patch(f"/Groups/{developers}", add).status_code == 200
    assert role() == "developer"
    assert entra.patch(f"/Groups/{admins}", add).status_code == 200
    assert role() == "developer"  # "Staff" names no organisation
    renamed = entra.patch(
        f"/Groups/{admins}", patch({"op": "Replace", "path": "displayName", "value": "Acme Admins"})
    )
    assert renamed.status_code == 200
    assert role() == "admin"

    remove = patch(
        {"op": "Remove", "path": "members", "value": [{"$ref": None, "value": ada["id"]}]}
    )
    assert entra.patch(f"/Groups/{admins}", remove).status_code == 200
    assert role() == "developer"
    assert entra.patch(f"/Groups/{developers}", remove).status_code == 200
    assert role() == "viewer"
    assert not ScimGroup.objects.get(id=developers).members.exists()

    changes = AuditEntry.objects.filter(
        organisation=crew["acme"], action="member.role", target="ada@contoso.com"
    ).order_by("id")
    assert [(e.details["from"], e.details["to"]) for e in changes] == [
        ("viewer", "developer"),
        ("developer", "admin"),
        ("admin", "developer"),
        ("developer", "viewer"),
    ]
    assert all(e.source == "scim" for e in changes)
    assert entra.delete(f"/Groups/{developers}").status_code == 204


def test_a_put_without_emails_keeps_the_address(scim):
    """userName is not an address here; a PUT that leaves out ``emails``
    must not make it one."""
    entra = scim("acme")
    user = entra.post("/Users", entra_user("Test_User_42", "kept@contoso.com")).json()
    replaced = entra.put(f"/Users/{user['id']}", {"userName": "Test_User_43", "active": True})
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["emails"][0]["value"] == "kept@contoso.com"
    assert replaced.json()["userName"] == "Test_User_43"
    assert ScimUser.objects.get(id=user["id"]).user.username == "kept@contoso.com"


@pytest.mark.parametrize(
    "content_type",
    ["application/scim+json; charset=utf-8", "application/json", "application/scim+json"],
)
def test_both_media_types_are_read_and_scim_json_is_written(scim, content_type):
    response = scim("acme").post(
        "/Users", entra_user("media@contoso.com", "media@contoso.com"), content_type=content_type
    )
    assert response.status_code == 201, response.content
    assert response["Content-Type"] == "application/scim+json"
