"""``manage.py apply`` with MCP servers: secrets come from the environment,
never the file; a second run changes nothing; a changed secret or field is
an update; ``--prune`` removes the servers the file dropped."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import AuditEntry, Organisation
from responses_api.catalogue.mcp_entries import mcp_headers
from responses_api.models import McpServer
from responses_api.runtime.secrets import decrypt

pytestmark = pytest.mark.django_db

DOCUMENT = {
    "organisations": [
        {
            "slug": "initech",
            "settings": {"allow_client_mcp_servers": True},
            "mcp_servers": [
                {
                    "label": "deepwiki",
                    "server_url": "https://mcp.example.com/mcp",
                    "transport": "streamable_http",
                    "authorization_env": "WIKI_TOKEN",
                    "headers_env": {"X-Api-Key": "WIKI_KEY"},
                    "allowed_tools": ["ask_question"],
                    "require_approval": "never",
                },
                {"label": "internal", "server_url": "http://10.0.0.8/mcp", "allow_private": True},
            ],
        }
    ]
}


@pytest.fixture
def apply(tmp_path, monkeypatch):
    monkeypatch.setenv("WIKI_TOKEN", "Bearer wiki-token-1")
    monkeypatch.setenv("WIKI_KEY", "wiki-key-1")

    def run(document: dict, *flags: str) -> list[str]:
        path = tmp_path / "switchyard.yaml"
        path.write_text(yaml.safe_dump(document))
        out = io.StringIO()
        call_command("apply", "-f", str(path), *flags, stdout=out)
        return out.getvalue().splitlines()

    return run


def copy() -> dict:
    return yaml.safe_load(yaml.safe_dump(DOCUMENT))


def test_a_file_registers_servers_with_secrets_from_the_environment(apply, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    lines = apply(DOCUMENT)
    assert "create    mcp_server initech/deepwiki" in lines
    assert "create    mcp_server initech/internal" in lines
    wiki = McpServer.objects.get(label="deepwiki")
    assert decrypt(wiki.authorization_encrypted) == "Bearer wiki-token-1"
    assert mcp_headers(wiki) == {"X-Api-Key": "wiki-key-1"}
    assert wiki.allowed_tools == ["ask_question"] and wiki.require_approval == "never"
    assert McpServer.objects.get(label="internal").allow_private
    assert Organisation.objects.get(slug="initech").allow_client_mcp_servers
    assert "wiki-key-1" not in "\n".join(lines) and "wiki-token-1" not in "\n".join(lines)
    assert AuditEntry.objects.filter(action="mcp_server.create", source="cli").count() == 2


def test_applying_twice_changes_nothing_and_a_rotated_secret_is_an_update(apply, monkeypatch):
    apply(DOCUMENT)
    entries = AuditEntry.objects.count()
    assert apply(DOCUMENT)[-1] == "0 create, 0 update, 3 unchanged, 0 delete."
    assert AuditEntry.objects.count() == entries
    monkeypatch.setenv("WIKI_KEY", "rotated")
    changed = copy()
    changed["organisations"][0]["mcp_servers"][0]["allowed_tools"] = ["ask_question", "read"]
    lines = apply(changed)
    assert "update    mcp_server initech/deepwiki (allowed_tools, headers)" in lines
    assert mcp_headers(McpServer.objects.get(label="deepwiki")) == {"X-Api-Key": "rotated"}


def test_prune_removes_the_servers_the_file_dropped(apply, people):
    from accounts.audit import CLI
    from responses_api.catalogue.services.mcp_servers import mcp_server_create

    apply(DOCUMENT)
    mcp_server_create(
        organisation=people["globex"], actor=CLI, label="internal", server_url="https://g.example/"
    )
    smaller = copy()
    smaller["organisations"][0]["mcp_servers"].pop()
    assert not any(line.startswith("delete") for line in apply(smaller))
    lines = apply(smaller, "--prune")
    assert [line for line in lines if line.startswith("delete")] == [
        "delete    mcp_server initech/internal"
    ]
    assert set(McpServer.objects.values_list("organisation__slug", "label")) == {
        ("initech", "deepwiki"),
        ("globex", "internal"),
    }


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.update(authorization="Bearer inline"), "never write a secret in the file"),
        (lambda s: s.update(headers={"X-A": "inline"}), "never write a secret in the file"),
        (lambda s: s.update(authorization_env="UNSET_VARIABLE"), "UNSET_VARIABLE is not set"),
        (lambda s: s.update(headers_env=["WIKI_KEY"]), "headers_env: a mapping"),
        (lambda s: s.update(label="9lives"), "organisations[0].mcp_servers[0].label"),
        (
            lambda s: s.update(server_url="http://169.254.169.254/"),
            "organisations[0].mcp_servers[0].server_url",
        ),
        (lambda s: s.update(allow_private="yes"), "allow_private: true or false"),
    ],
)
def test_an_invalid_server_is_named_and_nothing_is_applied(apply, edit, message):
    broken = copy()
    edit(broken["organisations"][0]["mcp_servers"][0])
    with pytest.raises(CommandError, match="Nothing was changed") as raised:
        apply(broken)
    assert message in str(raised.value)
    assert not McpServer.objects.exists() and not Organisation.objects.filter(slug="initech")
