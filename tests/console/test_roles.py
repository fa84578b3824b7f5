"""What each role may do (docs/admin/console.md): owners and admins manage;
developers create keys and revoke their own; viewers read."""

import pytest
from django.urls import reverse

from accounts.models import ApiKey, AuditEntry
from accounts.services.api_keys import api_key_create

pytestmark = pytest.mark.django_db

READ_PAGES = [
    "console:dashboard",
    "console:keys",
    "console:backends",
    "console:models",
    "console:usage",
    "console:members",
    "console:settings",
]


@pytest.mark.parametrize("who", ["alice", "erin", "bob", "dave"])
def test_every_member_reads_the_organisations_pages(as_user, estates, who):
    client = as_user(who)
    acme = estates["acme"]
    for name in READ_PAGES:
        assert client.get(reverse(name)).status_code == 200, name
    assert client.get(reverse("console:backend", args=[acme.backend.id])).status_code == 200
    assert client.get(reverse("console:model_edit", args=[acme.model.id])).status_code == 200
    assert client.get(reverse("console:trace", args=[acme.row.request_id])).status_code == 200


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("erin", 200), ("bob", 403), ("dave", 403)]
)
def test_only_owners_and_admins_read_the_audit_log(as_user, estates, who, status):
    assert as_user(who).get(reverse("console:audit")).status_code == status


@pytest.mark.parametrize(
    ("who", "allowed"), [("alice", True), ("erin", True), ("bob", False), ("dave", False)]
)
def test_managing_backends_and_models_needs_owner_or_admin(as_user, estates, who, allowed):
    client = as_user(who)
    acme = estates["acme"]
    expected = 200 if allowed else 403
    assert client.get(reverse("console:backend_create")).status_code == expected
    assert client.get(reverse("console:model_create")).status_code == expected
    assert (
        client.get(reverse("console:backend_edit", args=[acme.backend.id])).status_code == expected
    )
    response = client.post(
        reverse("console:backend_edit", args=[acme.backend.id]),
        {
            "name": "renamed",
            "base_url": "http://127.0.0.1:9/v1",
            "dialect": "vllm",
            "max_concurrency": 4,
            "enabled": "on",
        },
    )
    assert response.status_code == (302 if allowed else 403)
    acme.backend.refresh_from_db()
    assert (acme.backend.name == "renamed") is allowed
    body = client.get(reverse("console:backends")).content.decode()
    assert ("Add backend" in body) is allowed


def test_a_viewer_cannot_create_keys(as_user, estates):
    client = as_user("dave")
    assert client.get(reverse("console:key_create")).status_code == 403
    assert client.post(reverse("console:key_create"), {"name": "x"}).status_code == 403
    assert "New key" not in client.get(reverse("console:keys")).content.decode()
    assert ApiKey.objects.filter(name="x").count() == 0


def test_a_developer_creates_a_key_and_revokes_it(as_user, estates, crew):
    client = as_user("bob")
    response = client.post(reverse("console:key_create"), {"name": "bob's laptop"})
    assert response.status_code == 200
    key = ApiKey.objects.get(name="bob's laptop")
    assert key.created_by == crew["bob"]
    page = client.get(reverse("console:key_revoke", args=[key.id]))
    assert page.status_code == 200
    assert client.post(reverse("console:key_revoke", args=[key.id])).status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_a_developer_cannot_revoke_someone_elses_key(as_user, estates):
    client = as_user("bob")
    alices = estates["acme"].key
    assert client.get(reverse("console:key_revoke", args=[alices.id])).status_code == 403
    assert client.post(reverse("console:key_revoke", args=[alices.id])).status_code == 403
    alices.refresh_from_db()
    assert alices.revoked_at is None


def test_an_admin_revokes_any_key_of_the_organisation(as_user, crew):
    key, _ = api_key_create(organisation=crew["acme"], name="bob's", created_by=crew["bob"])
    assert as_user("erin").post(reverse("console:key_revoke", args=[key.id])).status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None


@pytest.mark.parametrize("who", ["bob", "dave"])
def test_developers_and_viewers_cannot_change_settings_or_members(as_user, crew, who):
    client = as_user(who)
    response = client.post(
        reverse("console:settings"),
        {
            "name": "Hacked",
            "retention_policy": "store",
            "store_ttl_hours": 1,
            "usage_retention_days": 1,
        },
    )
    assert response.status_code == 403
    crew["acme"].refresh_from_db()
    assert crew["acme"].name == "Acme"
    erin = crew["erin"].memberships.get()
    assert (
        client.post(
            reverse("console:member_role", args=[erin.public_id]), {"role": "viewer"}
        ).status_code
        == 403
    )
    assert client.post(reverse("console:member_remove", args=[erin.public_id])).status_code == 403
    assert (
        client.post(
            reverse("console:member_add"), {"add-email": "x@example.com", "add-role": "admin"}
        ).status_code
        == 403
    )
    assert (
        client.post(
            reverse("console:member_invite"),
            {"invite-email": "x@example.com", "invite-role": "admin"},
        ).status_code
        == 403
    )
    assert not AuditEntry.objects.filter(source="console").exists()


def test_a_signed_out_visitor_is_sent_to_the_login_page(client, estates):
    for name in READ_PAGES:
        response = client.get(reverse(name))
        assert response.status_code == 302 and response.url.startswith("/console/login/")


def test_a_person_without_an_organisation_sees_a_clear_page(client, db):
    from django.contrib.auth.models import User

    user = User.objects.create_user("loner@example.com", password="loner-password-1")
    client.force_login(user)
    response = client.get(reverse("console:dashboard"))
    assert response.status_code == 403
    assert "not a member of any organisation" in response.content.decode()
