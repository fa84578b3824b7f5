"""API keys in the console: created with options, shown once, revoked."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.keys import hash_key
from accounts.models import ApiKey, AuditEntry

pytestmark = pytest.mark.django_db


def test_a_new_key_is_shown_once_and_only_its_hash_is_stored(as_user, estates):
    client = as_user("alice")
    expires = (timezone.now() + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        reverse("console:key_create"),
        {
            "name": "CI",
            "allowed_models": ["acme-model"],
            "rpm": "60",
            "tpm": "1000",
            "concurrency": "2",
            "expires_at": expires,
        },
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    raw = response.context["raw_key"]
    assert raw.startswith("sy_sk_") and raw in response.content.decode()
    key = ApiKey.objects.get(name="CI")
    assert key.key_hash == hash_key(raw)
    assert (key.allowed_models, key.rpm, key.tpm, key.concurrency) == (["acme-model"], 60, 1000, 2)
    assert key.expires_at is not None
    listing = client.get(reverse("console:keys")).content.decode()
    assert key.prefix in listing and raw not in listing
    entry = AuditEntry.objects.get(action="api_key.create", source="console")
    assert entry.actor.username == "alice@example.com" and raw not in str(entry.details)


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"name": "  "}, "name", "This field is required."),
        ({"name": "x", "rpm": "0"}, "rpm", "Ensure this value is greater than or equal to 1."),
        (
            {"name": "x", "expires_at": "2001-01-01T00:00"},
            "expires_at",
            "The expiry must be in the future.",
        ),
        (
            {"name": "x", "allowed_models": ["globex-model"]},
            "allowed_models",
            "Select a valid choice.",
        ),
    ],
)
def test_invalid_key_forms_say_what_is_wrong(as_user, estates, data, field, message):
    response = as_user("alice").post(reverse("console:key_create"), data)
    assert response.status_code == 200
    assert any(message in e for e in response.context["form"].errors[field])
    assert not ApiKey.objects.filter(name="x").exists()


def test_revoking_needs_a_post_and_is_audited(as_user, estates):
    client = as_user("erin")
    key = estates["acme"].key
    confirm = client.get(reverse("console:key_revoke", args=[key.id]))
    assert "cannot be undone" in confirm.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is None
    client.post(reverse("console:key_revoke", args=[key.id]))
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert (
        AuditEntry.objects.filter(
            action="api_key.revoke", actor__username="erin@example.com"
        ).count()
        == 1
    )
    assert "revoked" in client.get(reverse("console:keys")).content.decode()


def test_posts_without_a_csrf_token_are_refused(crew, estates):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(crew["alice"])
    assert (
        client.post(reverse("console:key_revoke", args=[estates["acme"].key.id])).status_code == 403
    )
    assert client.post(reverse("console:key_create"), {"name": "x"}).status_code == 403
