"""Admin keys: their own kind, hashed, refused on the inference API; roles,
throttling and the audit trail of the management API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from accounts.keys import hash_key
from accounts.models import AdminApiKey, AuditEntry
from tests.admin_api.conftest import ADMIN, error_of

pytestmark = pytest.mark.django_db


def test_an_admin_key_is_stored_only_as_its_hash(admin_keys):
    raw = admin_keys["acme"]
    key = AdminApiKey.objects.get(key_hash=hash_key(raw))
    assert raw.startswith("sy_admin_") and key.prefix == raw[: len("sy_admin_") + 8]
    assert raw not in str(AdminApiKey.objects.values().get(pk=key.pk))


def test_create_admin_key_prints_the_key_alone_on_the_last_line(crew, capsys):
    call_command("create_admin_key", "--org", "acme", "--name", "terraform", "--role", "viewer")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    key = AdminApiKey.objects.get(key_hash=hash_key(raw))
    assert (key.name, key.role, key.organisation.slug) == ("terraform", "viewer", "acme")
    assert AuditEntry.objects.filter(action="admin_key.create", source="cli").exists()


@pytest.mark.parametrize(
    "header",
    ["", "Bearer ", "Basic abc", "Bearer sy_admin_not-a-real-key-at-all", "Token sy_admin_x"],
)
def test_missing_or_unknown_admin_keys_are_a_401_envelope(client, admin_keys, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.get(f"{ADMIN}/keys", **extra)
    assert response.status_code == 401
    error = error_of(response)
    assert (error["type"], error["code"]) == ("authentication_error", "invalid_api_key")


def test_an_inference_key_is_a_401_on_the_management_api(client, estates, admin_keys):
    response = client.get(
        f"{ADMIN}/organisation", HTTP_AUTHORIZATION=f"Bearer {estates['acme'].raw_key}"
    )
    assert response.status_code == 401 and error_of(response)["code"] == "invalid_api_key"


def test_revoked_and_expired_admin_keys_are_refused(api, admin_keys):
    from accounts.admin_keys import admin_key_revoke

    key = admin_keys["acme_key"]
    assert api("acme").get(f"{ADMIN}/me").status_code == 200
    admin_key_revoke(admin_key=key)
    assert api("acme").get(f"{ADMIN}/me").status_code == 401
    viewer = AdminApiKey.objects.get(name="acme reports")
    AdminApiKey.objects.filter(pk=viewer.pk).update(expires_at=timezone.now() - timedelta(1))
    assert api("acme_viewer").get(f"{ADMIN}/me").status_code == 401


def test_me_names_the_calling_key_and_records_its_use(api, admin_keys):
    body = api("acme").get(f"{ADMIN}/me").json()
    assert body["object"] == "admin_api_key" and body["role"] == "admin"
    assert body["organisation"] == "acme" and "key_hash" not in body
    assert AdminApiKey.objects.get(pk=body["id"]).last_used_at is not None


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("patch", "organisation", {"name": "Renamed"}),
        ("post", "keys", {"name": "x"}),
        ("post", "backends", {"name": "x", "base_url": "http://x/v1"}),
        ("post", "models", {"public_id": "x"}),
        ("post", "invitations", {"email": "new@example.com"}),
    ],
)
def test_viewer_keys_read_everything_and_write_nothing(api, estates, method, path, body):
    viewer = api("acme_viewer")
    assert viewer.get(f"{ADMIN}/{path}").status_code == 200
    before = AuditEntry.objects.count()
    response = getattr(viewer, method)(f"{ADMIN}/{path}", body, format="json")
    assert response.status_code == 403
    assert error_of(response)["type"] == "permission_error"
    assert AuditEntry.objects.count() == before


def test_viewer_keys_cannot_delete_or_check(api, estates):
    viewer = api("acme_viewer")
    for path in (f"keys/{estates['acme'].key.id}", f"backends/{estates['acme'].backend.id}"):
        assert viewer.delete(f"{ADMIN}/{path}").status_code == 403
    check = viewer.post(f"{ADMIN}/backends/{estates['acme'].backend.id}/check")
    assert check.status_code == 403


def test_changes_through_the_api_are_audited_under_the_admin_key(api, admin_keys):
    api("acme").patch(f"{ADMIN}/organisation", {"default_rpm": 60}, format="json")
    entry = AuditEntry.objects.get(action="organisation.settings")
    assert entry.source == "api" and entry.admin_key_id == admin_keys["acme_key"].pk
    assert entry.actor is None and entry.actor_name.startswith("admin key acme automation")
    listed = api("acme").get(f"{ADMIN}/audit", {"actor": str(admin_keys["acme_key"].pk)}).json()
    assert [e["action"] for e in listed["data"]] == ["organisation.settings"]
    assert listed["data"][0]["admin_key_id"] == str(admin_keys["acme_key"].pk)


def test_requests_over_the_rate_get_a_429_with_retry_after(api, settings):
    settings.SWITCHYARD_ADMIN_API_RATE = "3/min"
    client = api("acme")
    assert [client.get(f"{ADMIN}/me").status_code for _ in range(3)] == [200] * 3
    response = client.get(f"{ADMIN}/me")
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert error_of(response)["code"] == "rate_limit_exceeded"
    # Counted per key: another key of the same organisation is not held back.
    assert api("acme_viewer").get(f"{ADMIN}/me").status_code == 200


def test_no_session_is_accepted_and_no_csrf_is_needed(as_user, api):
    assert as_user("alice").get(f"{ADMIN}/organisation").status_code == 401
    client = api("acme")
    client.enforce_csrf_checks = True
    assert client.patch(f"{ADMIN}/organisation", {"name": "A"}, format="json").status_code == 200


def test_unknown_routes_and_methods_use_the_envelope(api):
    client = api("acme")
    missing = client.get(f"{ADMIN}/nothing/here")
    assert missing.status_code == 404 and error_of(missing)["code"] == "unknown_url"
    put = client.put(f"{ADMIN}/organisation", {}, format="json")
    assert put.status_code == 405 and error_of(put)["code"] == "method_not_allowed"
    not_json = client.post(
        f"{ADMIN}/keys", "name=x", content_type="application/x-www-form-urlencoded"
    )
    assert not_json.status_code == 415 and error_of(not_json)["type"] == "invalid_request_error"
    broken = client.post(f"{ADMIN}/keys", "{", content_type="application/json")
    assert broken.status_code == 400 and error_of(broken)["code"] == "invalid_json"


# --- The console's admin key pages ------------------------------------------------


def test_an_owner_creates_an_admin_key_shown_once(as_user, crew):
    client = as_user("alice")
    response = client.post(reverse("console:admin_key_create"), {"name": "CI", "role": "admin"})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    raw = response.context["raw_key"]
    key = AdminApiKey.objects.get(key_hash=hash_key(raw))
    assert key.created_by == crew["alice"] and key.role == "admin"
    listing = client.get(reverse("console:admin_keys")).content.decode()
    assert key.prefix in listing and raw not in listing


def test_an_admin_revokes_an_admin_key(as_user, admin_keys):
    key = admin_keys["acme_key"]
    response = as_user("erin").post(reverse("console:admin_key_revoke", args=[key.id]))
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    entry = AuditEntry.objects.get(action="admin_key.revoke")
    assert entry.actor.username == "erin@example.com"


@pytest.mark.parametrize("person", ["bob", "dave"])
def test_developers_and_viewers_cannot_see_or_make_admin_keys(as_user, admin_keys, person):
    client = as_user(person)
    key = admin_keys["acme_key"]
    assert client.get(reverse("console:admin_keys")).status_code == 403
    assert client.post(reverse("console:admin_key_create"), {"name": "x"}).status_code == 403
    assert client.post(reverse("console:admin_key_revoke", args=[key.id])).status_code == 403
    assert "Admin API keys" not in client.get(reverse("console:keys")).content.decode()


def test_another_organisations_admin_key_is_a_404_in_the_console(as_user, admin_keys):
    globex = AdminApiKey.objects.get(name="globex automation")
    response = as_user("alice").post(reverse("console:admin_key_revoke", args=[globex.id]))
    assert response.status_code == 404
    globex.refresh_from_db()
    assert globex.revoked_at is None
