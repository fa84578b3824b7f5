"""The retention policy and what is stored: the settings page and ``create_org``."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from accounts.models import AuditEntry, Organisation
from responses_api.models import StoredResponse
from responses_api.store import responses as store

pytestmark = pytest.mark.django_db

FORM = {
    "name": "Acme",
    "retention_policy": "store",
    "store_ttl_hours": "48",
    "usage_retention_days": "30",
    "default_rpm": "",
    "default_tpm": "",
    "default_concurrency": "",
}


def _keep(org, response_id: str) -> None:
    store.response_save(
        organisation_id=org.id,
        ttl_hours=24,
        response={"id": response_id, "output": []},
        input_items=[],
        instructions=None,
        previous=None,
        affinity="",
    )


def _stored_org(org):
    org.retention_policy, org.store_ttl_hours = "store", 24
    org.save()
    for n in range(3):
        _keep(org, f"resp_{org.slug}_{n}")


def test_the_settings_page_shows_what_is_stored(as_user, crew):
    _stored_org(crew["acme"])
    _keep(crew["globex"], "resp_globex")
    page = as_user("erin").get(reverse("console:settings")).content.decode()
    assert "3 stored responses" in page and "Delete all stored responses" in page
    viewer = as_user("dave").get(reverse("console:settings")).content.decode()
    assert "3 stored responses" in viewer and "Delete all stored responses" not in viewer


def test_turning_to_none_asks_first_then_deletes_what_is_stored(
    as_user, crew, django_capture_on_commit_callbacks
):
    acme = crew["acme"]
    _stored_org(acme)
    _keep(crew["globex"], "resp_globex")
    client = as_user("erin")
    asked = client.post(reverse("console:settings"), {**FORM, "retention_policy": "none"})
    assert asked.status_code == 200 and "Delete stored responses and save" in asked.content.decode()
    acme.refresh_from_db()
    assert acme.retention_policy == "store" and StoredResponse.objects.count() == 4
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(
            reverse("console:settings"),
            {**FORM, "retention_policy": "none", "confirm_delete": "yes"},
        )
    assert done.status_code == 302
    acme.refresh_from_db()
    assert acme.retention_policy == "none"
    assert list(StoredResponse.objects.values_list("id", flat=True)) == ["resp_globex"]
    entry = AuditEntry.objects.filter(action="organisation.settings").latest("id")
    assert entry.details["changed"]["retention_policy"] == ["store", "none"]
    assert entry.actor == crew["erin"]


def test_delete_all_stored_responses_is_confirmed_audited_and_for_admins(as_user, crew):
    _stored_org(crew["acme"])
    _keep(crew["globex"], "resp_globex")
    url = reverse("console:stored_delete")
    assert as_user("dave").post(url).status_code in (403, 404)
    assert as_user("bob").post(url).status_code in (403, 404)
    assert StoredResponse.objects.count() == 4
    client = as_user("alice")
    assert "Delete all stored responses and conversations?" in client.get(url).content.decode()
    assert client.post(url).status_code == 302
    assert list(StoredResponse.objects.values_list("id", flat=True)) == ["resp_globex"]
    entry = AuditEntry.objects.get(action="stored_responses.delete_all")
    assert entry.organisation == crew["acme"] and entry.details == {"deleted": 3}
    assert entry.actor == crew["alice"]


def _create_org(*args: str) -> str:
    out = StringIO()
    call_command("create_org", *args, stdout=out)
    return out.getvalue()


def test_create_org_sets_and_updates_the_retention_idempotently(
    django_capture_on_commit_callbacks,
):
    assert "retention=store store_ttl_hours=12" in _create_org(
        "acme", "--retention", "store", "--store-ttl-hours", "12"
    )
    org = Organisation.objects.get(slug="acme")
    assert (org.retention_policy, org.store_ttl_hours) == ("store", 12)
    settings_entries = AuditEntry.objects.filter(action="organisation.settings")
    assert settings_entries.count() == 1
    _create_org("acme", "--retention", "store", "--store-ttl-hours", "12")
    _create_org("acme")
    assert settings_entries.count() == 1
    assert Organisation.objects.get(slug="acme").store_ttl_hours == 12
    _keep(org, "resp_1")
    with django_capture_on_commit_callbacks(execute=True):
        _create_org("acme", "--retention", "none")
    assert Organisation.objects.get(slug="acme").retention_policy == "none"
    assert not StoredResponse.objects.exists()


def test_create_org_refuses_a_bad_ttl():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="store_ttl_hours"):
        _create_org("acme", "--retention", "store", "--store-ttl-hours", "0")
    assert not Organisation.objects.filter(slug="acme").exists()
