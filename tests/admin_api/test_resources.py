"""Each resource of the management API: create, read, update, delete, bad
input (a 400 naming ``param``), and another organisation's objects (404,
nothing changed)."""

from __future__ import annotations

import pytest

from accounts.keys import hash_key
from accounts.models import ApiKey, AuditEntry, Invitation, Membership
from responses_api.models import Backend, ServedModel
from responses_api.runtime.secrets import decrypt
from tests.admin_api.conftest import ADMIN, error_of

pytestmark = pytest.mark.django_db


def bad(response, param: str) -> dict:
    assert response.status_code == 400, response.content
    error = error_of(response)
    assert error["param"] == param and error["type"] == "invalid_request_error", error
    return error


def test_organisation_settings_are_read_and_changed(api):
    client = api("acme")
    body = client.get(f"{ADMIN}/organisation").json()
    assert (body["object"], body["id"], body["name"]) == ("organisation", "acme", "Acme")
    changed = client.patch(
        f"{ADMIN}/organisation",
        {"name": "Acme Ltd", "retention_policy": "store", "store_ttl_hours": 48, "default_rpm": 60},
        format="json",
    ).json()
    assert (changed["name"], changed["retention_policy"], changed["default_rpm"]) == (
        "Acme Ltd",
        "store",
        60,
    )
    assert changed["store_ttl_hours"] == 48


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"retention_policy": "forever"}, "retention_policy"),
        ({"default_rpm": 0}, "default_rpm"),
        ({"default_rpm": "60"}, "default_rpm"),
        ({"name": "  "}, "name"),
        ({"slug": "other"}, "slug"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_organisation_settings_name_the_field(api, body, param):
    bad(api("acme").patch(f"{ADMIN}/organisation", body, format="json"), param)


def test_api_keys_are_created_once_read_updated_and_revoked(api, estates):
    client = api("acme")
    created = client.post(
        f"{ADMIN}/keys", {"name": "CI", "allowed_models": ["acme-model"], "rpm": 60}, format="json"
    )
    assert created.status_code == 201
    body = created.json()
    key = ApiKey.objects.get(pk=body["id"])
    assert body["object"] == "api_key" and key.key_hash == hash_key(body["key"])
    shown = client.get(f"{ADMIN}/keys/{key.id}").json()
    assert "key" not in shown and shown["prefix"] == key.prefix
    assert body["key"] not in client.get(f"{ADMIN}/keys").content.decode()
    updated = client.patch(
        f"{ADMIN}/keys/{key.id}",
        {"name": "CI 2", "allowed_models": [], "tpm": 1000, "expires_at": "2099-01-01T00:00:00Z"},
        format="json",
    ).json()
    assert (updated["name"], updated["allowed_models"], updated["tpm"]) == ("CI 2", [], 1000)
    assert updated["expires_at"].startswith("2099-01-01")
    revoked = client.delete(f"{ADMIN}/keys/{key.id}")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    assert AuditEntry.objects.filter(action="api_key.revoke", source="api").count() == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "name"),
        ({"name": 5}, "name"),
        ({"name": "x", "rpm": 0}, "rpm"),
        ({"name": "x", "allowed_models": ["globex-model"]}, "allowed_models"),
        ({"name": "x", "allowed_models": [1]}, "allowed_models[0]"),
        ({"name": "x", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "x", "expires_at": "soon"}, "expires_at"),
        ({"name": "x", "key": "sy_sk_mine"}, "key"),
    ],
)
def test_bad_api_key_input_names_the_field(api, estates, body, param):
    bad(api("acme").post(f"{ADMIN}/keys", body, format="json"), param)


def test_backends_are_added_changed_checked_and_removed(api, simulator):
    client = api("acme")
    created = client.post(
        f"{ADMIN}/backends",
        {
            "name": "sim",
            "base_url": simulator.url,
            "dialect": "vllm",
            "max_concurrency": 4,
            "upstream_api_key": "upstream-secret",
            "extra_body": {"top_k": 20},
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["has_upstream_key"] is True and "upstream_api_key" not in body
    assert "upstream-secret" not in created.content.decode()
    backend = Backend.objects.get(pk=body["id"])
    assert decrypt(backend.api_key_encrypted) == "upstream-secret"
    changed = client.patch(
        f"{ADMIN}/backends/{backend.id}",
        {"enabled": False, "upstream_api_key": None},
        format="json",
    ).json()
    assert changed["enabled"] is False and changed["has_upstream_key"] is False
    check = client.post(f"{ADMIN}/backends/{backend.id}/check").json()
    assert check["object"] == "backend.check" and check["ok"] is True
    assert "sim-model" in check["models"] and check["backend"]["health"]["status"] == "online"
    assert AuditEntry.objects.filter(action="backend.test", source="api").exists()
    deleted = client.delete(f"{ADMIN}/backends/{backend.id}").json()
    assert deleted == {"id": str(backend.id), "object": "backend.deleted", "deleted": True}
    assert not Backend.objects.filter(pk=backend.id).exists()


def test_a_failed_check_says_why(api, estates):
    backend = estates["acme"].backend  # http://127.0.0.1:9: nothing listens there
    check = api("acme").post(f"{ADMIN}/backends/{backend.id}/check").json()
    assert check["ok"] is False and check["error"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"name": "x"}, "base_url"),
        ({"name": "x", "base_url": "ftp://x"}, "base_url"),
        ({"name": "acme-gpu", "base_url": "http://x/v1"}, "name"),
        ({"name": "x", "base_url": "http://x/v1", "dialect": "tgi"}, "dialect"),
        ({"name": "x", "base_url": "http://x/v1", "max_concurrency": -1}, "max_concurrency"),
        ({"name": "x", "base_url": "http://x/v1", "extra_body": [1]}, "extra_body"),
        ({"name": "x", "base_url": "http://x/v1", "enabled": "yes"}, "enabled"),
    ],
)
def test_bad_backend_input_names_the_field(api, estates, body, param):
    bad(api("acme").post(f"{ADMIN}/backends", body, format="json"), param)


def test_models_are_added_with_deployments_changed_and_removed(api, estates):
    client = api("acme")
    gpu = estates["acme"].backend
    created = client.post(
        f"{ADMIN}/models",
        {
            "public_id": "qwen3",
            "aliases": ["qwen"],
            "deployments": [{"backend": str(gpu.id), "upstream_name": "Qwen/Qwen3"}],
            "context_window": 32768,
            "max_output_tokens": 8192,
            "temperature": 0.6,
            "supports_vision": True,
            "reasoning_levels": ["high", "low"],
            "price_input": 0.1,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["object"] == "model" and body["reasoning_levels"] == ["low", "high"]
    assert body["deployments"] == [
        {"backend": str(gpu.id), "backend_name": "acme-gpu", "upstream_name": "Qwen/Qwen3"}
    ]
    assert body["price_input"] == 0.1
    model = ServedModel.objects.get(pk=body["id"])
    other = client.post(
        f"{ADMIN}/backends", {"name": "gpu2", "base_url": "http://gpu2/v1"}, format="json"
    ).json()
    changed = client.patch(
        f"{ADMIN}/models/{model.id}",
        {"deployments": [{"backend": other["id"], "upstream_name": "qwen3"}], "top_p": 0.9},
        format="json",
    ).json()
    assert [d["backend_name"] for d in changed["deployments"]] == ["gpu2"]
    assert changed["top_p"] == 0.9 and changed["aliases"] == ["qwen"]
    assert client.delete(f"{ADMIN}/models/{model.id}").json()["deleted"] is True
    assert not ServedModel.objects.filter(pk=model.id).exists()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "public_id"),
        ({"public_id": "two words"}, "public_id"),
        ({"public_id": "acme-model"}, "public_id"),
        ({"public_id": "x", "temperature": 3}, "temperature"),
        ({"public_id": "x", "context_window": 10, "max_output_tokens": 20}, "max_output_tokens"),
        ({"public_id": "x", "reasoning_levels": ["huge"]}, "reasoning_levels[0]"),
        ({"public_id": "x", "price_output": -1}, "price_output"),
        ({"public_id": "x", "price_output": "1"}, "price_output"),
        ({"public_id": "x", "deployments": [{"backend": "nope"}]}, "deployments[0].backend"),
        ({"public_id": "x", "deployments": [{"upstream_name": "u"}]}, "deployments[0].backend"),
    ],
)
def test_bad_model_input_names_the_field(api, estates, body, param):
    bad(api("acme").post(f"{ADMIN}/models", body, format="json"), param)


def test_a_deployment_on_another_organisations_backend_is_refused(api, estates):
    globex_gpu = estates["globex"].backend
    body = {
        "public_id": "x",
        "deployments": [{"backend": str(globex_gpu.id), "upstream_name": "u"}],
    }
    bad(api("acme").post(f"{ADMIN}/models", body, format="json"), "deployments[0].backend")
    assert not ServedModel.objects.filter(public_id="x").exists()


def test_members_are_listed_re_roled_and_removed(api, crew):
    client = api("acme")
    listed = client.get(f"{ADMIN}/members").json()
    assert {m["email"] for m in listed["data"]} >= {"alice@example.com", "bob@example.com"}
    bob = Membership.objects.get(user=crew["bob"])
    changed = client.patch(f"{ADMIN}/members/{bob.public_id}", {"role": "viewer"}, format="json")
    assert changed.json()["role"] == "viewer"
    bad(client.patch(f"{ADMIN}/members/{bob.public_id}", {"role": "god"}, format="json"), "role")
    assert client.delete(f"{ADMIN}/members/{bob.public_id}").json()["deleted"] is True
    assert not Membership.objects.filter(pk=bob.pk).exists()


def test_an_admin_key_cannot_grant_or_remove_the_owner_role(api, crew):
    client = api("acme")
    alice = Membership.objects.get(user=crew["alice"])
    bob = Membership.objects.get(user=crew["bob"])
    assert (
        client.patch(
            f"{ADMIN}/members/{bob.public_id}", {"role": "owner"}, format="json"
        ).status_code
        == 403
    )
    assert client.delete(f"{ADMIN}/members/{alice.public_id}").status_code == 403
    assert Membership.objects.get(pk=alice.pk).role == "owner"
    bad(
        client.post(f"{ADMIN}/invitations", {"email": "x@example.com", "role": "x"}, format="json"),
        "role",
    )
    owner_invite = client.post(
        f"{ADMIN}/invitations", {"email": "x@example.com", "role": "owner"}, format="json"
    )
    assert owner_invite.status_code == 403


def test_invitations_are_created_with_their_link_listed_and_revoked(api):
    client = api("acme")
    created = client.post(
        f"{ADMIN}/invitations", {"email": "New@Example.com", "role": "admin"}, format="json"
    )
    assert created.status_code == 201
    body = created.json()
    assert body["object"] == "invitation" and body["email"] == "new@example.com"
    assert "/console/invitation/" in body["url"] and body["status"] == "pending"
    assert [i["id"] for i in client.get(f"{ADMIN}/invitations").json()["data"]] == [body["id"]]
    revoked = client.delete(f"{ADMIN}/invitations/{body['id']}").json()
    assert revoked["status"] == "revoked"
    bad(client.post(f"{ADMIN}/invitations", {"email": "not-an-address"}, format="json"), "email")


def test_lists_page_with_after_and_limit(api, estates):
    client = api("acme")
    for n in range(5):
        client.post(f"{ADMIN}/keys", {"name": f"k{n}"}, format="json")
    first = client.get(f"{ADMIN}/keys", {"limit": 2}).json()
    assert first["object"] == "list" and first["has_more"] is True and len(first["data"]) == 2
    assert (first["first_id"], first["last_id"]) == (first["data"][0]["id"], first["data"][1]["id"])
    seen = [k["id"] for k in first["data"]]
    after = first["last_id"]
    while True:
        page = client.get(f"{ADMIN}/keys", {"limit": 2, "after": after}).json()
        seen += [k["id"] for k in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert len(seen) == len(set(seen)) == 6  # five new keys and the estate's
    bad(client.get(f"{ADMIN}/keys", {"limit": 101}), "limit")
    bad(client.get(f"{ADMIN}/keys", {"after": str(estates["globex"].key.id)}), "after")


def test_the_audit_log_is_filtered_and_paged(api, estates):
    client = api("acme")
    client.post(f"{ADMIN}/keys", {"name": "audited"}, format="json")
    keys = client.get(f"{ADMIN}/audit", {"action": "api_key."}).json()["data"]
    assert {e["action"] for e in keys} == {"api_key.create"} and len(keys) == 2
    assert all(e["object"] == "audit_entry" for e in keys)
    only_api = client.get(f"{ADMIN}/audit", {"action": "api_key.create", "since": "2000-01-01"})
    assert len(only_api.json()["data"]) == 2
    assert client.get(f"{ADMIN}/audit", {"until": "946684800"}).json()["data"] == []
    bad(client.get(f"{ADMIN}/audit", {"since": "yesterday"}), "since")
    globex = {e["target"] for e in client.get(f"{ADMIN}/audit", {"limit": 100}).json()["data"]}
    assert not any("globex" in target for target in globex)


# --- Tenancy: Globex's admin key against Acme's objects ---------------------------


def _acme_objects(estates, crew):
    acme = estates["acme"]
    invitation = Invitation.objects.create(
        organisation=crew["acme"], email="i@example.com", expires_at="2099-01-01T00:00:00Z"
    )
    member = Membership.objects.get(user=crew["bob"])
    return {
        "keys": acme.key.id,
        "backends": acme.backend.id,
        "models": acme.model.id,
        "members": member.public_id,
        "invitations": invitation.id,
    }


def _snapshot():
    from responses_api.models import Deployment

    return [
        list(model.objects.order_by("pk").values())
        for model in (ApiKey, Backend, ServedModel, Deployment, Membership, Invitation)
    ]


@pytest.mark.parametrize("resource", ["keys", "backends", "models", "members", "invitations"])
def test_another_organisations_objects_are_404_and_stay_unchanged(api, estates, crew, resource):
    object_id = _acme_objects(estates, crew)[resource]
    client = api("globex")
    before = _snapshot()
    missing = client.get(f"{ADMIN}/{resource}/00000000-0000-0000-0000-000000000000")
    attempts = [
        client.get(f"{ADMIN}/{resource}/{object_id}"),
        client.patch(f"{ADMIN}/{resource}/{object_id}", {"name": "stolen"}, format="json"),
        client.delete(f"{ADMIN}/{resource}/{object_id}"),
    ]
    if resource == "backends":
        attempts.append(client.post(f"{ADMIN}/backends/{object_id}/check"))
    for response in [missing, *attempts]:
        if response.status_code == 405:
            continue  # the resource has no such method at all (invitations: no PATCH)
        assert response.status_code == 404, (resource, response.status_code)
        assert error_of(response) == error_of(missing)
    assert _snapshot() == before
    listed = client.get(f"{ADMIN}/{resource}").json()["data"]
    assert str(object_id) not in {item["id"] for item in listed}


def test_another_organisations_usage_and_audit_are_invisible(api, estates):
    client = api("globex")
    acme_row = estates["acme"].row
    assert (
        client.get(f"{ADMIN}/usage", {"request_id": str(acme_row.request_id)}).json()["data"] == []
    )
    assert (
        str(acme_row.request_id)
        not in b"".join(client.get(f"{ADMIN}/usage", {"format": "csv"}).streaming_content).decode()
    )
    org = client.get(f"{ADMIN}/organisation").json()
    assert org["id"] == "globex"
