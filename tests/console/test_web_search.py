"""The web search page: admins bind, change and remove the provider; the
API key is never rendered; developers and viewers cannot reach it; each
organisation sees only its own binding."""

import pytest
from django.urls import reverse

from accounts.audit import CLI
from accounts.models import AuditEntry
from responses_api.catalogue.services.web_search import web_search_bind
from responses_api.models import WebSearchProvider
from responses_api.runtime.secrets import decrypt

pytestmark = pytest.mark.django_db

FORM = {
    "kind": "brave",
    "base_url": "https://api.search.example.com",
    "api_key": "console-brave-key-5",
    "enabled": "on",
}


def test_an_admin_binds_a_provider_whose_key_is_never_shown(as_user, crew):
    client = as_user("erin")
    assert b"Nothing is bound" in client.get(reverse("console:web_search")).content
    response = client.post(reverse("console:web_search"), FORM)
    assert response.status_code == 302
    provider = WebSearchProvider.objects.get()
    assert provider.organisation == crew["acme"]
    assert decrypt(provider.api_key_encrypted) == "console-brave-key-5"
    page = client.get(reverse("console:web_search")).content.decode()
    assert "Brave Search" in page and "console-brave-key-5" not in page
    assert provider.api_key_encrypted not in page
    # Saved again with the key left empty: the key stays.
    client.post(reverse("console:web_search"), {**FORM, "api_key": "", "enabled": ""})
    provider.refresh_from_db()
    assert decrypt(provider.api_key_encrypted) == "console-brave-key-5"
    assert provider.enabled is False
    client.post(reverse("console:web_search_remove"))
    assert not WebSearchProvider.objects.exists()
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"web_search.bind", "web_search.update", "web_search.unbind"} <= actions


def test_a_bad_url_is_shown_on_the_form(as_user):
    response = as_user("erin").post(reverse("console:web_search"), {**FORM, "base_url": "nope"})
    assert response.status_code == 200 and b"http://" in response.content
    assert not WebSearchProvider.objects.exists()


def test_viewers_cannot_reach_the_page(as_user):
    assert as_user("dave").get(reverse("console:web_search")).status_code in (403, 404)
    assert as_user("dave").post(reverse("console:web_search"), FORM).status_code in (403, 404)
    assert not WebSearchProvider.objects.exists()


def test_another_organisation_s_binding_is_not_shown(as_user, crew):
    web_search_bind(
        organisation=crew["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": "https://acme-search.example"},
    )
    page = as_user("charlie").get(reverse("console:web_search")).content.decode()
    assert "acme-search.example" not in page and "Nothing is bound" in page
    as_user("charlie").post(reverse("console:web_search_remove"))
    assert WebSearchProvider.objects.filter(organisation=crew["acme"]).exists()
