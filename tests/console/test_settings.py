"""Organisation settings, the audit log, login and password change."""

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import AuditEntry

pytestmark = pytest.mark.django_db

FORM = {
    "name": "Acme Corp",
    "retention_policy": "store",
    "store_ttl_hours": "48",
    "usage_retention_days": "30",
    "default_rpm": "600",
    "default_tpm": "",
    "default_concurrency": "4",
}


def test_an_admin_changes_the_settings_and_the_audit_log_says_so(as_user, crew):
    client = as_user("erin")
    assert client.post(reverse("console:settings"), FORM).status_code == 302
    acme = crew["acme"]
    acme.refresh_from_db()
    assert (acme.name, acme.retention_policy, acme.store_ttl_hours) == ("Acme Corp", "store", 48)
    assert (acme.default_rpm, acme.default_tpm, acme.default_concurrency) == (600, None, 4)
    entry = AuditEntry.objects.get(action="organisation.settings")
    assert entry.details["changed"]["retention_policy"] == ["none", "store"]
    audit = client.get(reverse("console:audit")).content.decode()
    assert "organisation.settings" in audit and "erin@example.com" in audit


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": " "}, "name"),
        ({"retention_policy": "forever"}, "retention_policy"),
        ({"store_ttl_hours": "0"}, "store_ttl_hours"),
        ({"default_rpm": "-5"}, "default_rpm"),
    ],
)
def test_invalid_settings_are_refused_with_a_message(as_user, crew, change, field):
    response = as_user("alice").post(reverse("console:settings"), {**FORM, **change})
    assert response.status_code == 200 and response.context["form"].errors[field]
    crew["acme"].refresh_from_db()
    assert crew["acme"].name == "Acme"


def test_a_viewer_sees_the_settings_read_only(as_user, crew):
    body = as_user("dave").get(reverse("console:settings")).content.decode()
    assert "Read only" in body and "Save settings" not in body


def test_the_audit_log_is_per_organisation(as_user, crew, estates):
    as_user("charlie").post(reverse("console:key_revoke", args=[estates["globex"].key.id]))
    revocations = AuditEntry.objects.filter(action="api_key.revoke")
    assert list(revocations.values_list("organisation", flat=True)) == [crew["globex"].pk]
    assert "api_key.revoke" not in as_user("alice").get(reverse("console:audit")).content.decode()


def test_login_logout_and_password_change(crew):
    client = Client()
    response = client.post(
        reverse("console:login"), {"username": "bob@example.com", "password": "wrong"}
    )
    assert response.status_code == 200 and "correct" in response.content.decode()
    response = client.post(
        reverse("console:login"), {"username": "bob@example.com", "password": "bob-password-1"}
    )
    assert response.status_code == 302 and response.url == "/console/"
    response = client.post(
        reverse("console:password"),
        {
            "old_password": "bob-password-1",
            "new_password1": "a-new-long-pass-7",
            "new_password2": "a-new-long-pass-7",
        },
    )
    assert response.status_code == 302
    crew["bob"].refresh_from_db()
    assert crew["bob"].check_password("a-new-long-pass-7")
    client.post(reverse("console:logout"))
    assert client.get(reverse("console:dashboard")).status_code == 302


def test_static_files_are_served_locally(client, db):
    for path in (
        "/static/console/console.css",
        "/static/console/htmx-2.0.11.min.js",
        "/static/console/console.js",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert len(body) > 500


def test_the_django_admin_stays_for_superusers(client, estates):
    from django.contrib.auth.models import User

    root = User.objects.create_superuser("root@example.com", "root@example.com", "root-password-1")
    client.force_login(root)
    for path in (
        "/admin/",
        "/admin/accounts/apikey/",
        "/admin/responses_api/usagelog/",
        "/admin/responses_api/backend/",
        "/admin/accounts/auditentry/",
    ):
        assert client.get(path).status_code == 200, path
    backend = client.get(
        f"/admin/responses_api/backend/{estates['acme'].backend.id}/change/"
    ).content.decode()
    assert "api_key_encrypted" not in backend


def test_the_audit_log_says_when_a_change_came_from_the_command_line(as_user, crew):
    from accounts.services.api_keys import api_key_create

    api_key_create(organisation=crew["acme"], name="from the shell")
    page = as_user("alice").get(reverse("console:audit")).content.decode()
    assert "from the shell" in page and "Command line" in page
