"""What SCIM refuses, in SCIM's error body and never with a 500: a missing
or wrong key (401), a key without the scim scope or a viewer key writing
(403), another organisation's users and groups (404, as if missing), and
bad input (400 with ``invalidFilter``, ``invalidPath``, ``invalidSyntax``,
``invalidValue``; 409 ``uniqueness``)."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry, Membership, ScimGroup, ScimUser
from tests.admin_api.conftest import Scim, scim_error_of

pytestmark = pytest.mark.django_db

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def new_user(client: Scim, user_name: str) -> dict:
    response = client.post("/Users", {"userName": user_name})
    assert response.status_code == 201, response.content
    return response.json()


def test_a_missing_or_unknown_key_is_a_401(scim_keys):
    for raw in (None, "sy_admin_" + "x" * 43, "sy_sk_" + "x" * 43):
        response = Scim(raw).get("/Users")
        scim_error_of(response, 401)
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_key_without_the_scim_scope_is_a_403(scim):
    body = scim_error_of(scim("acme_plain").get("/Users"), 403)
    assert "scim scope" in body["detail"]
    scim_error_of(scim("acme_plain").post("/Users", {"userName": "x@example.com"}), 403)
    assert not ScimUser.objects.exists()


def test_a_viewer_key_reads_and_never_writes(scim):
    assert scim("acme_viewer").get("/Users").status_code == 200
    scim_error_of(scim("acme_viewer").post("/Users", {"userName": "x@example.com"}), 403)
    assert not ScimUser.objects.exists()


def test_another_organisations_users_and_groups_are_404s(scim, crew):
    acme = scim("acme")
    user = new_user(acme, "ann@acme.test")
    group = acme.post("/Groups", {"displayName": "Acme Developers"}).json()
    globex = scim("globex")
    patch = {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "value": {"active": False}}]}
    for response in (
        globex.get(f"/Users/{user['id']}"),
        globex.put(f"/Users/{user['id']}", {"userName": "stolen@globex.test"}),
        globex.patch(f"/Users/{user['id']}", patch),
        globex.delete(f"/Users/{user['id']}"),
        globex.get(f"/Groups/{group['id']}"),
        globex.patch(
            f"/Groups/{group['id']}", {"Operations": [{"op": "remove", "path": "members"}]}
        ),
        globex.delete(f"/Groups/{group['id']}"),
        globex.get("/Users/not-a-uuid"),
    ):
        scim_error_of(response, 404)
    assert (
        globex.get("/Users", {"filter": 'userName eq "ann@acme.test"'}).json()["totalResults"] == 0
    )
    assert globex.get("/Groups").json()["totalResults"] == 0
    # Nor can Globex put Acme's user in a group of its own.
    scim_error_of(
        globex.post("/Groups", {"displayName": "G", "members": [{"value": user["id"]}]}),
        400,
        "invalidValue",
    )
    assert Membership.objects.filter(
        user__username="ann@acme.test", organisation=crew["acme"]
    ).exists()
    assert ScimUser.objects.get(id=user["id"]).active
    assert not ScimGroup.objects.filter(organisation=crew["globex"]).exists()
    assert not AuditEntry.objects.filter(organisation=crew["globex"], source="scim").exists()


@pytest.mark.parametrize(
    "text",
    [
        'userName sw "a"',
        "userName eq a",
        'userName eq "a" and active eq true',
        'password eq "a"',
        'members[value eq "a"]',
        "",
        '"',
    ],
)
def test_an_unsupported_filter_is_invalid_filter(scim, text):
    response = scim("acme").get("/Users", {"filter": text})
    if text == "":
        assert response.status_code == 200  # no filter at all
    else:
        scim_error_of(response, 400, "invalidFilter")


def test_paging_must_be_numbers(scim):
    scim_error_of(scim("acme").get("/Users", {"count": "many"}), 400, "invalidValue")


@pytest.mark.parametrize(
    ("operations", "scim_type"),
    [
        ([{"op": "replace", "path": "favouriteColour", "value": "red"}], "invalidPath"),
        ([{"op": "replace", "value": {"shoeSize": 44}}], "invalidPath"),
        ([{"op": "replace", "path": "active", "value": "maybe"}], "invalidValue"),
        ([{"op": "replace", "path": "userName", "value": 7}], "invalidValue"),
        ([{"op": "remove", "path": "active"}], "mutability"),
        ([{"op": "move", "path": "active", "value": True}], "invalidSyntax"),
        ([{"op": "replace", "value": "x"}], "noTarget"),
        ([], "invalidSyntax"),
        (["replace"], "invalidSyntax"),
        ([{"op": "replace", "path": "emails", "value": "not-a-list"}], "invalidValue"),
        (
            [{"op": "replace", "path": "emails", "value": [{"value": "not an address"}]}],
            "invalidValue",
        ),
    ],
)
def test_a_bad_user_patch_is_a_400(scim, operations, scim_type):
    client = scim("acme")
    user = new_user(client, "pat@acme.test")
    response = client.patch(
        f"/Users/{user['id']}", {"schemas": [PATCH_OP], "Operations": operations}
    )
    scim_error_of(response, 400, scim_type)
    assert ScimUser.objects.get(id=user["id"]).active


@pytest.mark.parametrize(
    "body",
    ["{not json", "[1, 2]", '"text"', "", '{"userName": ' * 100 + "1" + "}" * 100],
)
def test_malformed_json_is_invalid_syntax_or_value(scim, body):
    response = scim("acme").post("/Users", body)
    assert response.status_code == 400, response.content
    assert response.json()["scimType"] in ("invalidSyntax", "invalidValue")


@pytest.mark.parametrize(
    "body",
    [
        {"userName": ""},
        {"userName": ["a"]},
        {"userName": "no-address-here"},
        {"userName": "a@acme.test", "active": "sometimes"},
        {"userName": "a@acme.test", "name": "Ann"},
        {"userName": "a@acme.test", "emails": {"value": "a@acme.test"}},
        {"userName": "a@acme.test", "externalId": 12},
        {"userName": "x" * 300 + "@acme.test"},
    ],
)
def test_a_bad_user_is_invalid_value(scim, body):
    scim_error_of(scim("acme").post("/Users", body), 400, "invalidValue")
    assert not ScimUser.objects.exists()


def test_a_taken_user_name_or_group_name_is_a_409(scim):
    client = scim("acme")
    new_user(client, "dup@acme.test")
    scim_error_of(client.post("/Users", {"userName": "DUP@acme.test"}), 409, "uniqueness")
    assert client.post("/Groups", {"displayName": "Team"}).status_code == 201
    scim_error_of(client.post("/Groups", {"displayName": "Team"}), 409, "uniqueness")


def test_another_organisation_cannot_rename_a_shared_account(scim, crew):
    """Bob is in Acme; Globex's provider provisions him too, then tries to
    change his address: that would rename him in Acme."""
    globex = scim("globex")
    bob = new_user(globex, "bob@example.com")
    response = globex.patch(
        f"/Users/{bob['id']}",
        {
            "Operations": [
                {"op": "replace", "path": "emails", "value": [{"value": "bob@globex.test"}]}
            ]
        },
    )
    scim_error_of(response, 409, "uniqueness")
    crew["bob"].refresh_from_db()
    assert crew["bob"].username == "bob@example.com"


def test_a_bad_group_patch_is_a_400(scim):
    client = scim("acme")
    group = client.post("/Groups", {"displayName": "Team"}).json()
    for operations, scim_type in (
        ([{"op": "add", "path": "members", "value": [{"value": "not-a-user"}]}], "invalidValue"),
        ([{"op": "add", "path": "members", "value": "x"}], "invalidValue"),
        ([{"op": "replace", "path": "colour", "value": "red"}], "invalidPath"),
        ([{"op": "remove", "path": "displayName"}], "invalidPath"),
    ):
        response = client.patch(f"/Groups/{group['id']}", {"Operations": operations})
        scim_error_of(response, 400, scim_type)


def test_unknown_endpoints_and_methods(scim):
    client = scim("acme")
    scim_error_of(client.get("/Bulk"), 404)
    scim_error_of(client.delete("/Users"), 405)
    scim_error_of(client.get("/Schemas/urn:nope"), 404)
    response = client.post("/Users", "userName=x", content_type="application/x-www-form-urlencoded")
    scim_error_of(response, 415)


def test_discovery_documents(scim):
    client = scim("acme")
    config = client.get("/ServiceProviderConfig")
    assert config.status_code == 200
    assert config["Content-Type"].startswith("application/scim+json")
    assert config.json()["patch"] == {"supported": True}
    assert config.json()["filter"]["supported"] is True
    types = client.get("/ResourceTypes").json()
    assert {r["id"] for r in types["Resources"]} == {"User", "Group"}
    assert client.get("/ResourceTypes/User").json()["endpoint"] == "/Users"
    schemas = client.get("/Schemas").json()
    assert {s["name"] for s in schemas["Resources"]} == {"User", "Group"}
    user = client.get("/Schemas/urn:ietf:params:scim:schemas:core:2.0:User").json()
    assert "userName" in {a["name"] for a in user["attributes"]}


@pytest.mark.parametrize(
    ("params", "found"),
    [
        ({"startIndex": "99999999999999999999999"}, 0),
        ({"count": "99999999999999999999999"}, 1),
        ({"filter": 'id eq "not-a-uuid"'}, 0),
        ({"filter": 'userName eq "' + "a" * 5000 + '"'}, 0),
    ],
)
def test_extreme_paging_and_filters_are_answered(scim, params, found):
    new_user(scim("acme"), "someone@acme.test")
    response = scim("acme").get("/Users", params)
    assert response.status_code == 200, response.content
    assert len(response.json()["Resources"]) == found


def test_nul_characters_are_invalid_values(scim):
    client = scim("acme")
    scim_error_of(client.post("/Users", {"userName": "a\u0000@acme.test"}), 400, "invalidValue")
    scim_error_of(client.post("/Groups", {"displayName": "a\u0000b"}), 400, "invalidValue")
    scim_error_of(client.get("/Users", {"filter": 'userName eq "a\\u0000"'}), 400, "invalidFilter")
    user = new_user(client, "nul@acme.test")
    response = client.patch(
        f"/Users/{user['id']}",
        {"Operations": [{"op": "replace", "path": "name.givenName", "value": "\u0000"}]},
    )
    scim_error_of(response, 400, "invalidValue")
