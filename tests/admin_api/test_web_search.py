"""The web search provider on the management API and in ``apply -f``:
bound, read, changed and unbound through the one service, each with an
audit entry; the API key is write-only and encrypted; another
organisation's binding is invisible; viewer keys read only."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.audit import CLI
from accounts.models import AuditEntry, Organisation
from responses_api.catalogue.services.web_search import web_search_bind
from responses_api.models import WebSearchProvider
from responses_api.runtime.secrets import decrypt
from tests.admin_api.conftest import ADMIN, error_of

pytestmark = pytest.mark.django_db

URL = f"{ADMIN}/web-search"
BODY = {"kind": "brave", "base_url": "https://api.search.example.com", "api_key": "brave-key-77"}


def test_a_provider_is_bound_read_changed_and_unbound(api):
    client = api("acme")
    assert client.get(URL).status_code == 404
    response = client.put(URL, BODY, format="json")
    assert response.status_code == 200, response.content
    bound = response.json()
    assert bound["object"] == "web_search_provider" and bound["kind"] == "brave"
    assert bound["has_api_key"] is True and "api_key" not in bound
    assert "brave-key-77" not in response.content.decode()
    provider = WebSearchProvider.objects.get(pk=bound["id"])
    assert provider.api_key_encrypted != "brave-key-77"
    assert decrypt(provider.api_key_encrypted) == "brave-key-77"
    assert client.get(URL).json()["base_url"] == "https://api.search.example.com"

    # Only the fields given change; the key is kept.
    changed = client.patch(URL, {"enabled": False}, format="json").json()
    assert changed["enabled"] is False and changed["has_api_key"] is True
    switched = client.put(
        URL, {"kind": "searxng", "base_url": "https://searx.example.org"}, format="json"
    )
    assert switched.json()["kind"] == "searxng"

    deleted = client.delete(URL)
    assert deleted.json() == {
        "id": bound["id"],
        "object": "web_search_provider.deleted",
        "deleted": True,
    }
    assert client.get(URL).status_code == 404
    actions = list(
        AuditEntry.objects.filter(action__startswith="web_search.")
        .order_by("created_at")
        .values_list("action", flat=True)
    )
    assert actions == [
        "web_search.bind",
        "web_search.update",
        "web_search.update",
        "web_search.unbind",
    ]
    assert not any("brave-key-77" in str(e.details) for e in AuditEntry.objects.all())


def test_another_organisation_s_binding_is_invisible(api, crew):
    web_search_bind(
        organisation=crew["globex"],
        actor=CLI,
        data={"kind": "searxng", "base_url": "https://globex-search.example"},
    )
    client = api("acme")
    missing = client.get(URL)
    assert missing.status_code == 404
    assert client.delete(URL).status_code == 404
    # Acme binding its own changes nothing of Globex's.
    client.put(URL, {"kind": "searxng", "base_url": "https://acme-search.example"}, format="json")
    globex = WebSearchProvider.objects.get(organisation=crew["globex"])
    assert globex.base_url == "https://globex-search.example"
    assert api("globex").get(URL).json()["base_url"] == "https://globex-search.example"


def test_a_bad_binding_is_a_400_naming_the_field(api):
    client = api("acme")
    response = client.put(URL, {"kind": "bing", "base_url": "https://x.example"}, format="json")
    assert response.status_code == 400 and error_of(response)["param"] == "kind"
    response = client.put(URL, {"kind": "searxng", "base_url": "ftp://x"}, format="json")
    assert error_of(response)["param"] == "base_url"
    response = client.put(URL, {"kind": "mcp", "mcp_server_label": "index"}, format="json")
    assert error_of(response)["param"] == "mcp_tool"
    response = client.put(
        URL,
        {"kind": "searxng", "base_url": "https://x.example", "allow_private": True},
        format="json",
    )
    assert error_of(response)["param"] == "allow_private"
    assert not WebSearchProvider.objects.exists()


def test_a_viewer_key_reads_only(api):
    api("acme").put(URL, BODY, format="json")
    viewer = api("acme_viewer")
    assert viewer.get(URL).status_code == 200
    assert viewer.put(URL, {"enabled": False}, format="json").status_code == 403
    assert viewer.delete(URL).status_code == 403


def test_apply_binds_from_the_environment_and_changes_nothing_twice(tmp_path, monkeypatch, crew):
    monkeypatch.setenv("BRAVE_KEY", "brave-from-env-1")
    document = {
        "organisations": [
            {
                "slug": "acme",
                "web_search": {
                    "kind": "brave",
                    "base_url": "https://api.search.example.com",
                    "api_key_env": "BRAVE_KEY",
                },
            }
        ]
    }

    def run(doc, *flags):
        path = tmp_path / "switchyard.yaml"
        path.write_text(yaml.safe_dump(doc))
        out = io.StringIO()
        call_command("apply", "-f", str(path), *flags, stdout=out)
        return out.getvalue()

    first = run(document)
    assert "web_search" in first and "create" in first
    provider = WebSearchProvider.objects.get(organisation__slug="acme")
    assert decrypt(provider.api_key_encrypted) == "brave-from-env-1"
    second = run(document)
    assert "unchanged" in second and "web_search.update" not in str(
        list(AuditEntry.objects.values_list("action", flat=True))
    )
    document["organisations"][0]["web_search"]["api_key"] = "inline"
    with pytest.raises(CommandError, match="never write a key"):
        run(document)
    del document["organisations"][0]["web_search"]
    run(document, "--prune")
    assert not WebSearchProvider.objects.filter(
        organisation=Organisation.objects.get(slug="acme")
    ).exists()
