"""MCP servers: one write path that validates, encrypts the headers and the
authorization, audits without secrets, and makes the catalogue cache
forget; the read the tool loop uses sees the change at once."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import connection

from accounts.audit import CLI, Actor
from accounts.models import AuditEntry
from accounts.services.organisations import organisation_settings_update
from responses_api.catalogue import catalog
from responses_api.catalogue.services.mcp_servers import (
    mcp_server_create,
    mcp_server_delete,
    mcp_server_ensure,
    mcp_server_update,
)
from responses_api.models import McpServer

pytestmark = pytest.mark.django_db

SECRET_HEADER = "hdr-secret-4711"
SECRET_AUTH = "Bearer auth-secret-0815"


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    catalog.forget()
    yield
    catalog.forget()


def register(organisation, actor=CLI, **fields):
    values = {
        "label": "deepwiki",
        "server_url": "https://mcp.example.com/mcp",
        "headers": {"X-Api-Key": SECRET_HEADER},
        "authorization": SECRET_AUTH,
        **fields,
    }
    return mcp_server_create(organisation=organisation, actor=actor, **values)


def raw_columns(server_id) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT headers_encrypted, authorization_encrypted FROM {McpServer._meta.db_table} "
            "WHERE id = %s",
            [server_id.hex if connection.vendor == "sqlite" else server_id],
        )
        return cursor.fetchone()


def servers(organisation_id: int) -> dict:
    return async_to_sync(catalog.mcp_servers_for)(organisation_id)


def test_headers_and_authorization_are_encrypted_in_the_database(people):
    server = register(people["acme"])
    headers, authorization = raw_columns(server.id)
    assert headers and authorization
    for column in (headers, authorization):
        assert SECRET_HEADER not in column and "auth-secret" not in column
        assert "X-Api-Key" not in column


def test_the_loop_reads_decrypted_values_and_another_organisation_sees_none(people):
    register(people["acme"], allowed_tools=["ask", "ask", " read "], approval_exceptions=["ask"])
    entry = servers(people["acme"].id)["deepwiki"]
    assert entry.headers == {"X-Api-Key": SECRET_HEADER} and entry.authorization == SECRET_AUTH
    assert entry.allowed_tools == frozenset({"ask", "read"})
    assert entry.approval_exceptions == frozenset({"ask"})
    assert SECRET_HEADER not in repr(entry) and "auth-secret" not in repr(entry)
    assert servers(people["globex"].id) == {}


def test_every_write_is_audited_without_secrets(people):
    server = register(people["acme"])
    server_id = str(server.id)
    mcp_server_update(
        server=server, actor=CLI, data={"headers": {"X-Other": "x-secret-2"}, "enabled": False}
    )
    mcp_server_update(server=server, actor=CLI, data={"authorization": None})
    mcp_server_delete(server=server, actor=CLI)
    entries = list(AuditEntry.objects.filter(action__startswith="mcp_server.").order_by("id"))
    assert [e.action for e in entries] == [
        "mcp_server.create",
        "mcp_server.update",
        "mcp_server.update",
        "mcp_server.delete",
    ]
    assert entries[0].details["headers"] == ["X-Api-Key"]
    assert entries[0].details["authorization"] == "set"
    assert entries[1].details["changed"] == ["enabled"]
    assert entries[1].details["headers"] == ["X-Other"]
    assert entries[2].details == {
        "mcp_server_id": server_id,
        "changed": [],
        "authorization": "cleared",
    }
    text = str([e.details for e in entries])
    assert SECRET_HEADER not in text and "auth-secret" not in text and "x-secret-2" not in text


def test_an_update_that_changes_nothing_writes_nothing(people):
    server = register(people["acme"])
    count = AuditEntry.objects.count()
    same = {"label": "deepwiki", "server_url": "https://mcp.example.com/mcp", "authorization": ""}
    mcp_server_update(server=server, actor=CLI, data=same)
    assert AuditEntry.objects.count() == count


def test_empty_authorization_keeps_it_and_null_headers_remove_them(people):
    server = register(people["acme"])
    mcp_server_update(server=server, actor=CLI, data={"authorization": "", "headers": None})
    entry = servers(people["acme"].id)["deepwiki"]
    assert entry.authorization == SECRET_AUTH and entry.headers == {}


def test_writes_make_the_cached_read_forget_at_once(people):
    acme = people["acme"]
    assert servers(acme.id) == {}
    server = register(acme)
    assert set(servers(acme.id)) == {"deepwiki"}
    mcp_server_update(server=server, actor=CLI, data={"server_url": "https://other.example.com/"})
    assert servers(acme.id)["deepwiki"].server_url == "https://other.example.com/"
    mcp_server_delete(server=server, actor=CLI)
    assert servers(acme.id) == {}


def test_the_organisation_switch_reaches_the_resolver_input_at_once(people):
    acme = people["acme"]
    assert async_to_sync(catalog.mcp_organisation_for)(acme.id).allow_client_servers is False
    organisation_settings_update(
        organisation=acme, actor=CLI, data={"allow_client_mcp_servers": True}
    )
    assert async_to_sync(catalog.mcp_organisation_for)(acme.id).allow_client_servers is True
    entry = AuditEntry.objects.filter(action="organisation.settings").latest("id")
    assert entry.details["changed"] == {"allow_client_mcp_servers": [False, True]}


def test_a_label_is_unique_per_organisation_only(people):
    register(people["acme"])
    with pytest.raises(ValidationError) as raised:
        register(people["acme"])
    assert "label" in raised.value.message_dict
    assert register(people["globex"]).label == "deepwiki"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"label": "1abc"}, "label"),
        ({"label": "a" * 65}, "label"),
        ({"label": "has space"}, "label"),
        ({"label": "dots.no"}, "label"),
        ({"server_url": "ftp://x"}, "server_url"),
        ({"server_url": "https://user:pw@x.example/"}, "server_url"),
        ({"server_url": "https://x.example/#frag"}, "server_url"),
        ({"transport": "websocket"}, "transport"),
        ({"require_approval": "sometimes"}, "require_approval"),
        ({"allowed_tools": "ask"}, "allowed_tools"),
        ({"allowed_tools": [""]}, "allowed_tools"),
        ({"approval_exceptions": [1]}, "approval_exceptions"),
        ({"enabled": "yes"}, "enabled"),
        ({"headers": {"Bad Name": "x"}}, "headers"),
        ({"headers": {"X-A": "line\r\nInjected: 1"}}, "headers"),
        ({"headers": {"Host": "evil"}}, "headers"),
        ({"authorization": "a\nb"}, "authorization"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(people, fields, field):
    with pytest.raises(ValidationError) as raised:
        register(people["acme"], **fields)
    assert field in raised.value.message_dict
    assert not McpServer.objects.exists()


def test_labels_follow_openais_rule(people):
    for label in ("a", "A-b_c-1", "x" * 64):
        assert register(people["acme"], label=label).label == label


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest",
        "http://metadata.google.internal/",
        "http://10.0.0.5/mcp",
        "http://127.0.0.1:8080/mcp",
        "http://localhost/mcp",
        "http://[fe80::1]/mcp",
    ],
)
def test_the_address_policy_refuses_non_public_servers(people, settings, url):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    with pytest.raises(ValidationError) as raised:
        register(people["acme"], server_url=url)
    message = raised.value.message_dict["server_url"][0]
    assert "MCP server's address" in message and "not allowed" in message


def test_only_platform_staff_allow_a_private_address(people, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    owner = Actor.console(people["alice"])
    with pytest.raises(ValidationError):
        register(people["acme"], actor=owner, server_url="http://10.0.0.5/", allow_private=True)
    server = register(people["acme"], server_url="http://10.0.0.5/", allow_private=True)
    assert server.allow_private
    # An organisation's admin moving it drops the flag, and the new address is judged.
    with pytest.raises(ValidationError):
        mcp_server_update(server=server, actor=owner, data={"server_url": "http://10.0.0.6/"})
    with pytest.raises(ValidationError):
        mcp_server_update(server=server, actor=owner, data={"allow_private": False})


def test_ensure_is_idempotent(people):
    first, created = mcp_server_ensure(
        organisation=people["acme"], label="wiki", server_url="https://w.example/mcp"
    )
    again, created_again = mcp_server_ensure(
        organisation=people["acme"], label="wiki", server_url="https://w.example/mcp"
    )
    assert created and not created_again and first.pk == again.pk
    assert AuditEntry.objects.filter(action__startswith="mcp_server.").count() == 1


def test_a_label_missing_from_the_cache_reloads_it(people):
    """Another process registered it: this process's cache never heard."""
    import time

    acme = people["acme"]
    assert servers(acme.id) == {}
    McpServer.objects.create(organisation=acme, label="late", server_url="https://l.example/")
    assert servers(acme.id) == {}
    time.sleep(catalog.MISS_RELOAD_AFTER)
    found = async_to_sync(catalog.mcp_organisation_for)(acme.id, missing="late")
    assert set(found.servers) == {"late"}
