"""Which server a request's ``mcp`` tool reaches: a registered label wins and
may only be narrowed; a request's own server_url needs the organisation's
switch and passes the address policy; another organisation's label is as
unknown as a label nobody registered."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from accounts.audit import CLI
from accounts.services.organisations import organisation_settings_update
from responses_api.catalogue import catalog
from responses_api.catalogue.mcp_entries import McpOrganisation, McpServerEntry
from responses_api.catalogue.mcp_resolve import ResolvedMcpServer, resolve_mcp_tool
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.protocol.errors import ApiError


def entry(**fields) -> McpServerEntry:
    values = {
        "id": "00000000-0000-0000-0000-000000000001",
        "label": "wiki",
        "server_url": "https://registered.example/mcp",
        "description": "The wiki",
        "transport": "streamable_http",
        "headers": {"X-Api-Key": "registered-secret"},
        "authorization": "Bearer registered-token",
        "allowed_tools": frozenset({"search", "read", "write"}),
        "read_only_only": False,
        "require_approval": "never",
        "approval_exceptions": frozenset({"write"}),
        "enabled": True,
        "allow_private": False,
        **fields,
    }
    return McpServerEntry(**values)


def org(*servers: McpServerEntry, client: bool = False) -> McpOrganisation:
    return McpOrganisation(servers={s.label: s for s in servers}, allow_client_servers=client)


def resolved(organisation: McpOrganisation, tool: dict, index: int = 0) -> ResolvedMcpServer:
    result = resolve_mcp_tool(organisation, {"type": "mcp", **tool}, index=index)
    assert isinstance(result, ResolvedMcpServer), result
    return result


def refused(organisation: McpOrganisation, tool: dict, index: int = 0) -> ApiError:
    result = resolve_mcp_tool(organisation, {"type": "mcp", **tool}, index=index)
    assert isinstance(result, ApiError), result
    assert result.status == 400 and result.type == "invalid_request_error"
    assert set(result.body()["error"]) == {"message", "type", "param", "code"}
    return result


def test_a_registered_label_wins_over_the_requests_url_headers_and_rules():
    server = resolved(
        org(entry(), client=True),
        {
            "server_label": "wiki",
            "server_url": "https://attacker.example/mcp",
            "headers": {"X-Api-Key": "request-secret"},
            "authorization": "Bearer request-token",
            "require_approval": "always",
        },
    )
    assert server.registered and server.server_url == "https://registered.example/mcp"
    assert server.headers == {"X-Api-Key": "registered-secret"}
    assert server.authorization == "Bearer registered-token"
    assert server.transport == "streamable_http" and server.description == "The wiki"
    assert not server.needs_approval("search") and server.needs_approval("write")
    assert "registered-secret" not in repr(server) and "token" not in repr(server)


def test_a_requests_authorization_is_used_where_the_registered_server_has_none():
    server = resolved(
        org(entry(authorization="")), {"server_label": "wiki", "authorization": "Bearer mine"}
    )
    assert server.authorization == "Bearer mine"


def test_a_request_narrows_the_allowed_tools_but_cannot_widen_them():
    organisation = org(entry())
    narrowed = resolved(
        organisation, {"server_label": "wiki", "allowed_tools": ["search", "delete"]}
    )
    assert narrowed.allowed_tools == frozenset({"search"})
    assert narrowed.allows("search") and not narrowed.allows("delete")
    assert not narrowed.allows("read")
    full = resolved(organisation, {"server_label": "wiki"})
    assert full.allowed_tools == frozenset({"search", "read", "write"})
    filtered = resolved(
        organisation,
        {"server_label": "wiki", "allowed_tools": {"tool_names": ["read"], "read_only": True}},
    )
    assert filtered.allowed_tools == frozenset({"read"}) and filtered.read_only
    assert filtered.allows("read", read_only_hint=True) and not filtered.allows("read")


def test_a_server_allowing_every_tool_takes_the_requests_list():
    server = resolved(
        org(entry(allowed_tools=None)), {"server_label": "wiki", "allowed_tools": ["x"]}
    )
    assert server.allowed_tools == frozenset({"x"})
    assert resolved(org(entry(allowed_tools=None)), {"server_label": "wiki"}).allows("anything")


def test_the_registered_read_only_rule_cannot_be_lifted():
    server = resolved(
        org(entry(read_only_only=True)),
        {"server_label": "wiki", "allowed_tools": {"tool_names": ["read"], "read_only": False}},
    )
    assert server.read_only and not server.allows("read")


def test_an_unknown_label_is_refused_naming_server_label():
    error = refused(org(entry()), {"server_label": "other"}, index=2)
    assert error.param == "tools[2].server_label" and error.code == "unknown_server_label"
    assert "Unknown server_label 'other'" in error.message


def test_a_disabled_server_is_refused():
    error = refused(org(entry(enabled=False)), {"server_label": "wiki"})
    assert error.param == "tools[0].server_label" and "disabled" in error.message


def test_a_client_server_url_is_refused_unless_the_organisation_allows_it():
    tool = {"server_label": "mine", "server_url": "https://mine.example/mcp"}
    error = refused(org(entry()), tool, index=1)
    assert error.param == "tools[1].server_url"
    assert error.code == "client_mcp_servers_not_allowed"
    server = resolved(
        org(entry(), client=True),
        {**tool, "headers": {"X-Key": "k"}, "authorization": "Bearer t", "allowed_tools": ["a"]},
    )
    assert not server.registered and server.server_url == "https://mine.example/mcp"
    assert server.headers == {"X-Key": "k"} and server.authorization == "Bearer t"
    assert server.allowed_tools == frozenset({"a"}) and server.needs_approval("a")


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://[fe80::1]/mcp",
        "http://[::ffff:169.254.169.254]/",
    ],
)
def test_link_local_and_metadata_addresses_are_always_refused(settings, url):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = True
    error = refused(org(client=True), {"server_label": "x", "server_url": url})
    assert error.param == "tools[0].server_url" and "not allowed" in error.message


@pytest.mark.parametrize("url", ["http://10.1.2.3/mcp", "http://127.0.0.1:6379/", "http://[::1]/"])
def test_private_addresses_follow_the_platform_setting(settings, url):
    tool = {"server_label": "x", "server_url": url}
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    assert refused(org(client=True), tool).param == "tools[0].server_url"
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = True
    assert resolved(org(client=True), tool).server_url == url


def test_the_resolved_policy_judges_names_at_connect_time(settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    client = resolved(org(client=True), {"server_label": "x", "server_url": "https://a.example/"})
    assert client.policy.refusal("10.0.0.1") == "private"
    assert client.policy.refusal("169.254.169.254") == "cloud metadata"
    staff_flagged = resolved(org(entry(allow_private=True)), {"server_label": "wiki"})
    assert staff_flagged.policy.refusal("169.254.169.254") is None


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"server_label": "9lives"}, "tools[0].server_label"),
        ({}, "tools[0].server_label"),
        ({"server_label": "x", "server_url": "ftp://x/"}, "tools[0].server_url"),
        ({"server_label": "x", "server_url": "https://u:p@x.example/"}, "tools[0].server_url"),
        ({"server_label": "x", "server_url": 5}, "tools[0].server_url"),
        (
            {"server_label": "x", "server_url": "https://x.example", "headers": []},
            "tools[0].headers",
        ),
        (
            {"server_label": "x", "server_url": "https://x.example", "headers": {"A": "b\nc"}},
            "tools[0].headers",
        ),
        ({"server_label": "wiki", "allowed_tools": "search"}, "tools[0].allowed_tools"),
        ({"server_label": "wiki", "allowed_tools": {"names": []}}, "tools[0].allowed_tools"),
        (
            {"server_label": "wiki", "allowed_tools": {"read_only": "yes"}},
            "tools[0].allowed_tools.read_only",
        ),
        ({"server_label": "wiki", "authorization": 7}, "tools[0].authorization"),
        ({"server_label": "wiki", "connector_id": "connector_gmail"}, "tools[0].connector_id"),
        (
            {"server_label": "x", "server_url": "https://x.example", "require_approval": "maybe"},
            "tools[0].require_approval",
        ),
    ],
)
def test_bad_tools_are_refused_naming_the_field(tool, param):
    assert refused(org(entry(), client=True), tool).param == param


def test_a_requests_approval_filter_applies_to_its_own_server():
    tool = {
        "server_label": "x",
        "server_url": "https://x.example/mcp",
        "require_approval": {"never": {"tool_names": ["read"]}},
    }
    server = resolved(org(client=True), tool)
    assert not server.needs_approval("read") and server.needs_approval("write")
    never = resolved(org(client=True), {**tool, "require_approval": "never"})
    assert not never.needs_approval("write")


@pytest.mark.django_db
def test_another_organisations_label_is_unknown_exactly_like_a_missing_one(people):
    catalog.forget()
    globex = people["globex"]
    mcp_server_create(
        organisation=globex, actor=CLI, label="secret-wiki", server_url="https://g.example/mcp"
    )
    organisation_settings_update(
        organisation=people["acme"], actor=CLI, data={"allow_client_mcp_servers": False}
    )
    acme = async_to_sync(catalog.mcp_organisation_for)(people["acme"].id)
    theirs = refused(acme, {"server_label": "secret-wiki"})
    missing = refused(acme, {"server_label": "never-registered"})
    assert (theirs.param, theirs.code, theirs.type) == (missing.param, missing.code, missing.type)
    assert theirs.message.replace("secret-wiki", "X") == missing.message.replace(
        "never-registered", "X"
    )
    assert "g.example" not in theirs.message
    own = async_to_sync(catalog.mcp_organisation_for)(globex.id)
    assert resolved(own, {"server_label": "secret-wiki"}).server_url == "https://g.example/mcp"
    catalog.forget()
