"""MCP servers on the management API: create, read, filter, update, delete;
the headers and the authorization are write-only; another organisation's
server is a 404 and stays as it was; viewer keys read only."""

from __future__ import annotations

import pytest

from accounts.audit import CLI
from accounts.models import AuditEntry
from responses_api.catalogue.mcp_entries import mcp_headers
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.models import McpServer
from responses_api.runtime.secrets import decrypt
from tests.admin_api.conftest import ADMIN, error_of

pytestmark = pytest.mark.django_db

URL = f"{ADMIN}/mcp-servers"
BODY = {
    "label": "deepwiki",
    "server_url": "https://mcp.example.com/mcp",
    "description": "Docs of public repositories",
    "transport": "streamable_http",
    "headers": {"X-Api-Key": "header-secret-1"},
    "authorization": "Bearer token-secret-1",
    "allowed_tools": ["ask_question", "read_wiki"],
    "require_approval": "never",
    "approval_exceptions": ["ask_question"],
}


def bad(response, param: str) -> dict:
    assert response.status_code == 400, response.content
    error = error_of(response)
    assert error["param"] == param and error["type"] == "invalid_request_error", error
    return error


@pytest.fixture
def globex_server(crew):
    return mcp_server_create(
        organisation=crew["globex"],
        actor=CLI,
        label="globex-tools",
        server_url="https://globex.example/mcp",
        headers={"X-Globex": "globex-secret"},
    )


def test_a_server_is_created_read_listed_updated_and_deleted(api):
    client = api("acme")
    response = client.post(URL, BODY, format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["object"] == "mcp_server" and created["label"] == "deepwiki"
    assert created["header_names"] == ["X-Api-Key"] and created["has_authorization"] is True
    assert "headers" not in created and "authorization" not in created
    assert "secret" not in response.content.decode()
    server = McpServer.objects.get(pk=created["id"])
    assert mcp_headers(server) == {"X-Api-Key": "header-secret-1"}
    assert decrypt(server.authorization_encrypted) == "Bearer token-secret-1"

    assert client.get(f"{URL}/{created['id']}").json() == created
    listed = client.get(URL).json()
    assert [s["label"] for s in listed["data"]] == ["deepwiki"]
    assert "secret" not in client.get(URL).content.decode()

    changed = client.patch(
        f"{URL}/{created['id']}",
        {"allowed_tools": None, "enabled": False, "authorization": None},
        format="json",
    ).json()
    assert changed["allowed_tools"] is None and changed["enabled"] is False
    assert changed["has_authorization"] is False and changed["header_names"] == ["X-Api-Key"]
    removed = client.delete(f"{URL}/{created['id']}").json()
    assert removed == {"id": created["id"], "object": "mcp_server.deleted", "deleted": True}
    assert not McpServer.objects.exists()
    actions = list(
        AuditEntry.objects.filter(action__startswith="mcp_server.")
        .order_by("id")
        .values_list("action", "source", "admin_key__name")
    )
    assert actions == [
        ("mcp_server.create", "api", "acme automation"),
        ("mcp_server.update", "api", "acme automation"),
        ("mcp_server.delete", "api", "acme automation"),
    ]


def test_the_list_filters_by_label_and_enabled(api):
    client = api("acme")
    client.post(URL, BODY, format="json")
    client.post(URL, {**BODY, "label": "off", "enabled": False}, format="json")
    labels = lambda query: [s["label"] for s in client.get(f"{URL}?{query}").json()["data"]]  # noqa: E731
    assert labels("label=off") == ["off"]
    assert labels("enabled=true") == ["deepwiki"]
    assert labels("enabled=false") == ["off"]
    bad(client.get(f"{URL}?enabled=maybe"), "enabled")


def test_another_organisations_server_is_a_404_and_stays_as_it_was(api, globex_server):
    client = api("acme")
    path = f"{URL}/{globex_server.id}"
    for response in (
        client.get(path),
        client.patch(path, {"server_url": "https://acme.example/"}, format="json"),
        client.delete(path),
    ):
        assert response.status_code == 404
        assert error_of(response)["type"] == "not_found_error"
    missing = client.get(f"{URL}/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and error_of(missing) == error_of(client.get(path))
    assert client.get(URL).json()["data"] == []
    assert client.get(f"{URL}?label=globex-tools").json()["data"] == []
    globex_server.refresh_from_db()
    assert globex_server.server_url == "https://globex.example/mcp"
    # The same label is free in Acme: labels are per organisation.
    assert client.post(URL, {**BODY, "label": "globex-tools"}, format="json").status_code == 201


def test_a_viewer_key_reads_but_cannot_write(api):
    api("acme").post(URL, BODY, format="json")
    viewer = api("acme_viewer")
    assert viewer.get(URL).status_code == 200
    assert viewer.post(URL, {**BODY, "label": "other"}, format="json").status_code == 403
    server = McpServer.objects.get()
    assert viewer.delete(f"{URL}/{server.id}").status_code == 403


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"label": "9bad"}, "label"),
        ({"label": 5}, "label"),
        ({"server_url": "ftp://x"}, "server_url"),
        ({"server_url": "http://169.254.169.254/"}, "server_url"),
        ({"transport": "grpc"}, "transport"),
        ({"headers": {"X-A": 1}}, "headers.X-A"),
        ({"headers": {"Bad Name": "x"}}, "headers"),
        ({"headers": {"Authorization": "x"}}, "headers"),
        ({"allowed_tools": "ask"}, "allowed_tools"),
        ({"require_approval": "sometimes"}, "require_approval"),
        ({"enabled": "true"}, "enabled"),
        ({"allow_private": True}, "allow_private"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, body, param):
    bad(api("acme").post(URL, {**BODY, **body}, format="json"), param)
    assert not McpServer.objects.exists()


def test_a_duplicate_label_is_a_400(api):
    client = api("acme")
    client.post(URL, BODY, format="json")
    bad(client.post(URL, BODY, format="json"), "label")


def test_the_organisation_switch_is_read_and_changed(api):
    client = api("acme")
    assert client.get(f"{ADMIN}/organisation").json()["allow_client_mcp_servers"] is False
    changed = client.patch(
        f"{ADMIN}/organisation", {"allow_client_mcp_servers": True}, format="json"
    ).json()
    assert changed["allow_client_mcp_servers"] is True
    bad(
        client.patch(f"{ADMIN}/organisation", {"allow_client_mcp_servers": "yes"}, format="json"),
        "allow_client_mcp_servers",
    )
    assert api("globex").get(f"{ADMIN}/organisation").json()["allow_client_mcp_servers"] is False


def test_the_schema_describes_the_endpoints_without_readable_secrets(api):
    schema = api("acme").get(f"{ADMIN}/openapi.json").json()
    assert {"/mcp-servers/", "/mcp-servers/{id}/"} <= set(schema["paths"])
    parameters = {p["name"] for p in schema["paths"]["/mcp-servers/"]["get"]["parameters"]}
    assert {"label", "enabled"} <= parameters
    components = schema["components"]["schemas"]
    assert {"headers", "authorization"} <= set(components["McpServerRequest"]["properties"])
    shown = set(components["McpServer"]["properties"])
    assert {"header_names", "has_authorization"} <= shown
    assert not {"headers", "authorization"} & shown
