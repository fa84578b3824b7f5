"""The settings page's deletion takes everything the organisation stores,
as its card lists it: its responses and its conversations (with their
items), each audited, and nothing of another organisation's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.models import AuditEntry
from responses_api.models import Conversation, ConversationItem, StoredResponse
from responses_api.store import conversations as store
from tests.console.test_stored_responses import _keep

pytestmark = pytest.mark.django_db


def _conversation(org, items: int) -> str:
    return store.conversation_create(
        organisation_id=org.id,
        ttl_hours=24,
        metadata=None,
        items=[{"role": "user", "content": f"item {n}"} for n in range(items)],
    )["id"]


def test_deleting_all_stored_content_takes_the_conversations_too(as_user, crew):
    acme, globex = crew["acme"], crew["globex"]
    acme.retention_policy = "store"
    acme.save()
    _keep(acme, "resp_acme")
    _conversation(acme, 2)
    _conversation(acme, 0)
    theirs = _conversation(globex, 1)
    _keep(globex, "resp_globex")

    settings_page = as_user("alice").get(reverse("console:settings")).content.decode()
    assert "Delete all stored responses and conversations" in settings_page
    url = reverse("console:stored_delete")
    client = as_user("alice")
    asked = client.get(url).content.decode()
    assert "Delete all stored responses and conversations?" in asked
    assert "its 1 stored response " in asked
    assert "its 2 conversations with their 2 items" in asked
    # Only for those who manage the settings.
    assert as_user("dave").post(url).status_code in (403, 404)
    assert Conversation.objects.filter(organisation=acme).count() == 2

    done = client.post(url, follow=True)
    assert "1 stored response and 2 conversations deleted." in done.content.decode()
    assert list(StoredResponse.objects.values_list("id", flat=True)) == ["resp_globex"]
    assert list(Conversation.objects.values_list("id", flat=True)) == [theirs]
    assert ConversationItem.objects.count() == 1
    entry = AuditEntry.objects.get(action="conversations.delete_all")
    assert entry.organisation == acme and entry.details == {"deleted": 2}
    assert entry.actor == crew["alice"]
    assert AuditEntry.objects.get(action="stored_responses.delete_all").details == {"deleted": 1}


def test_the_deletion_is_offered_when_only_conversations_are_kept(as_user, crew):
    acme = crew["acme"]
    acme.retention_policy = "store"
    acme.save()
    _conversation(acme, 1)
    page = as_user("alice").get(reverse("console:settings")).content.decode()
    assert "0 stored responses" in page
    assert "Delete all stored responses and conversations" in page
    viewer = as_user("dave").get(reverse("console:settings")).content.decode()
    assert "Delete all stored responses and conversations" not in viewer
