"""“Use with Codex” for an API key (docs/api/codex.md)."""

from __future__ import annotations

import json
import tomllib

import pytest
from django.urls import reverse


def page_url(key, **query) -> str:
    url = reverse("console:key_codex", args=[key.id])
    if query:
        url += "?" + "&".join(f"{name}={value}" for name, value in query.items())
    return url


@pytest.mark.parametrize("person", ["alice", "bob", "erin", "dave"])
def test_every_role_sees_it_without_the_key(estates, as_user, person):
    acme = estates["acme"]
    response = as_user(person).get(page_url(acme.key))
    assert response.status_code == 200
    body = response.content.decode()
    assert acme.raw_key not in body
    assert f"({acme.key.prefix}…): &#x27;; read -r SWITCHYARD_API_KEY" in body
    assert "[model_providers.switchyard]" in body
    assert "remote compaction" in body
    assert "supports_websockets = true" in body and "WebSocket mode" in body
    assert "acme-model" in body
    assert 'data-copy="#codex-config-toml"' in body
    assert "?download=model_catalog.json" in body
    assert "style=" not in body and "<script>" not in body


def test_the_command_line_hint_writes_the_base_url_the_page_shows(estates, as_user):
    acme = estates["acme"]
    response = as_user("alice").get(page_url(acme.key), HTTP_HOST="localhost:8443")
    body = response.content.decode()
    assert "(http://localhost:8443/v1)" in body
    assert "--base-url http://localhost:8443 --out ~/.codex" in body


def test_another_organisations_key_is_a_404(estates, as_user):
    globex = estates["globex"]
    assert as_user("alice").get(page_url(globex.key)).status_code == 404
    assert as_user("alice").get(page_url(globex.key, download="config.toml")).status_code == 404


def test_downloads(estates, as_user):
    acme = estates["acme"]
    client = as_user("dave")
    config = client.get(page_url(acme.key, download="config.toml"))
    assert config["Content-Disposition"] == 'attachment; filename="config.toml"'
    parsed = tomllib.loads(config.content.decode())
    assert parsed["model_providers"]["switchyard"]["base_url"] == "http://testserver/v1"
    # The name that makes Codex compact long sessions on the server.
    assert parsed["model_providers"]["switchyard"]["name"] == "OpenAI"
    # WebSocket mode: one socket per Codex session.
    assert parsed["model_providers"]["switchyard"]["supports_websockets"] is True
    profile = client.get(page_url(acme.key, download="switchyard.config.toml"))
    assert tomllib.loads(profile.content.decode())["model"] == "acme-model"
    catalog = client.get(page_url(acme.key, download="model_catalog.json"))
    assert catalog["Content-Disposition"] == 'attachment; filename="model_catalog.json"'
    assert [m["slug"] for m in json.loads(catalog.content)["models"]] == ["acme-model"]
    for response in (config, profile, catalog):
        assert acme.raw_key.encode() not in response.content
    assert client.get(page_url(acme.key, download="other.txt")).status_code == 404


def test_public_url_setting_wins_over_the_host(estates, as_user, settings):
    settings.SWITCHYARD_PUBLIC_URL = "https://ai.example.com"
    response = as_user("alice").get(page_url(estates["acme"].key, download="config.toml"))
    assert 'base_url = "https://ai.example.com/v1"' in response.content.decode()


def test_keys_list_links_to_it(estates, as_user):
    body = as_user("dave").get(reverse("console:keys")).content.decode()
    assert page_url(estates["acme"].key) in body
