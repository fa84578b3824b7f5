"""The settings page counts the organisation's conversations, and turning
the policy to "store nothing" asks before it deletes them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from responses_api.models import Conversation
from responses_api.store import conversations as store
from tests.console.test_stored_responses import FORM

pytestmark = pytest.mark.django_db


def _conversation(org, items: int) -> None:
    store.conversation_create(
        organisation_id=org.id,
        ttl_hours=24,
        metadata=None,
        items=[{"role": "user", "content": f"item {n}"} for n in range(items)],
    )


def test_the_settings_page_counts_only_the_organisations_conversations(as_user, crew):
    acme = crew["acme"]
    acme.retention_policy = "store"
    acme.save()
    _conversation(acme, 3)
    _conversation(acme, 0)
    _conversation(crew["globex"], 5)
    page = as_user("erin").get(reverse("console:settings")).content.decode()
    assert "2 conversations, 3 items (encrypted)." in page


def test_turning_to_none_asks_first_when_only_conversations_are_kept(
    as_user, crew, django_capture_on_commit_callbacks
):
    acme = crew["acme"]
    acme.retention_policy = "store"
    acme.save()
    _conversation(acme, 1)
    _conversation(crew["globex"], 1)
    client = as_user("erin")
    asked = client.post(reverse("console:settings"), {**FORM, "retention_policy": "none"})
    body = asked.content.decode()
    assert asked.status_code == 200 and "the 1 conversation of this organisation" in body
    assert Conversation.objects.count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("console:settings"),
            {**FORM, "retention_policy": "none", "confirm_delete": "yes"},
        )
    assert list(Conversation.objects.values_list("organisation__slug", flat=True)) == ["globex"]
