"""MCP servers in the console: admins add, edit and remove them; headers are
shown by name only and no secret is ever rendered; developers and viewers
read; another organisation's server is a 404 like a missing one."""

import uuid

import pytest
from django.urls import reverse

from accounts.audit import CLI
from accounts.models import AuditEntry
from responses_api.catalogue.mcp_entries import mcp_headers
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.models import McpServer
from responses_api.runtime.secrets import decrypt

pytestmark = pytest.mark.django_db

FORM = {
    "label": "deepwiki",
    "server_url": "https://mcp.example.com/mcp",
    "description": "Docs",
    "transport": "auto",
    "headers": "X-Api-Key: header-secret-1\nX-Team: team-secret-2",
    "authorization": "Bearer token-secret-3",
    "allowed_tools": "ask_question, read_wiki",
    "require_approval": "never",
    "approval_exceptions": "ask_question",
    "enabled": "on",
}
SECRETS = ("header-secret-1", "team-secret-2", "token-secret-3")


def assert_no_secret(body: str, server: McpServer | None = None) -> None:
    stored = (server.headers_encrypted, server.authorization_encrypted) if server else ()
    for secret in (*SECRETS, *stored):
        assert secret not in body


def test_an_admin_adds_a_server_whose_secrets_are_never_shown(as_user, crew):
    client = as_user("erin")
    response = client.post(reverse("console:mcp_server_create"), FORM)
    assert response.status_code == 302 and response.url == reverse("console:mcp_servers")
    server = McpServer.objects.get()
    assert server.organisation == crew["acme"] and server.allowed_tools == [
        "ask_question",
        "read_wiki",
    ]
    assert mcp_headers(server) == {"X-Api-Key": "header-secret-1", "X-Team": "team-secret-2"}
    assert decrypt(server.authorization_encrypted) == "Bearer token-secret-3"
    for url in (
        reverse("console:mcp_servers"),
        reverse("console:mcp_server_edit", args=[server.id]),
        reverse("console:mcp_server_remove", args=[server.id]),
        reverse("console:audit"),
    ):
        body = client.get(url).content.decode()
        assert_no_secret(body, server)
    listing = client.get(reverse("console:mcp_servers")).content.decode()
    assert "X-Api-Key" in listing and "X-Team" in listing and "deepwiki" in listing
    entry = AuditEntry.objects.get(action="mcp_server.create")
    assert entry.source == "console" and not any(s in str(entry.details) for s in SECRETS)


def test_editing_with_empty_secret_fields_keeps_them_and_the_boxes_remove_them(as_user, crew):
    client = as_user("alice")
    client.post(reverse("console:mcp_server_create"), FORM)
    server = McpServer.objects.get()
    edit = reverse("console:mcp_server_edit", args=[server.id])
    kept = {**FORM, "headers": "", "authorization": "", "allowed_tools": ""}
    assert client.post(edit, kept).status_code == 302
    server.refresh_from_db()
    assert mcp_headers(server)["X-Api-Key"] == "header-secret-1"
    assert decrypt(server.authorization_encrypted) == "Bearer token-secret-3"
    assert server.allowed_tools is None
    cleared = {**kept, "clear_headers": "on", "clear_authorization": "on"}
    client.post(edit, cleared)
    server.refresh_from_db()
    assert server.headers_encrypted == "" and server.authorization_encrypted == ""


def test_removing_asks_then_deletes(as_user, crew):
    client = as_user("erin")
    client.post(reverse("console:mcp_server_create"), FORM)
    server = McpServer.objects.get()
    remove = reverse("console:mcp_server_remove", args=[server.id])
    assert "Remove “deepwiki”?" in client.get(remove).content.decode()
    assert McpServer.objects.exists()
    assert client.post(remove).status_code == 302
    assert not McpServer.objects.exists()
    assert AuditEntry.objects.filter(action="mcp_server.delete", source="console").exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"label": "1st"}, "label"),
        ({"server_url": "ftp://x"}, "server_url"),
        ({"headers": "no colon here"}, "headers"),
        ({"headers": "Bad Name: x"}, "headers"),
        ({"transport": "pigeon"}, "transport"),
    ],
)
def test_bad_forms_are_refused_with_a_message(as_user, crew, change, field):
    response = as_user("alice").post(reverse("console:mcp_server_create"), {**FORM, **change})
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not McpServer.objects.exists()
    # A submitted secret is not rendered back either.
    assert_no_secret(response.content.decode())


def test_developers_and_viewers_read_but_cannot_change(as_user, crew):
    server = mcp_server_create(
        organisation=crew["acme"], actor=CLI, label="wiki", server_url="https://w.example/"
    )
    for who in ("bob", "dave"):
        client = as_user(who)
        page = client.get(reverse("console:mcp_servers"))
        assert page.status_code == 200 and "wiki" in page.content.decode()
        assert client.get(reverse("console:mcp_server_create")).status_code == 403
        edit = reverse("console:mcp_server_edit", args=[server.id])
        assert client.post(edit, {**FORM, "label": "taken"}).status_code == 403
        remove = reverse("console:mcp_server_remove", args=[server.id])
        assert client.post(remove).status_code == 403
    server.refresh_from_db()
    assert server.label == "wiki"


def test_another_organisations_server_is_404_like_a_missing_one(as_user, crew):
    theirs = mcp_server_create(
        organisation=crew["globex"],
        actor=CLI,
        label="globex-tools",
        server_url="https://globex.example/mcp",
    )
    client = as_user("alice")
    for name in ("console:mcp_server_edit", "console:mcp_server_remove"):
        foreign = client.get(reverse(name, args=[theirs.id]))
        missing = client.get(reverse(name, args=[uuid.uuid4()]))
        assert foreign.status_code == missing.status_code == 404
        assert client.post(reverse(name, args=[theirs.id]), FORM).status_code == 404
    assert "globex-tools" not in client.get(reverse("console:mcp_servers")).content.decode()
    theirs.refresh_from_db()
    assert theirs.server_url == "https://globex.example/mcp"
    assert McpServer.objects.count() == 1


def test_the_settings_page_turns_client_servers_on(as_user, crew):
    client = as_user("erin")
    form = client.get(reverse("console:settings")).context["form"]
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update({"allow_client_mcp_servers": "on", "monthly_budget": ""})
    response = client.post(reverse("console:settings"), data)
    assert response.status_code == 302, response.context["form"].errors
    acme = crew["acme"]
    acme.refresh_from_db()
    assert acme.allow_client_mcp_servers is True
    assert "allowed" in client.get(reverse("console:mcp_servers")).content.decode()
