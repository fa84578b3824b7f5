"""MCP servers: the remote tool servers an organisation registers by label.
The headers and the authorization are write-only and stored encrypted; only
platform staff may let a server sit on a private address, as for backends."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.audit import CLI, Actor, audit_record
from accounts.models import Organisation
from accounts.validation import FieldErrors, choice_field, flag_field, refuse_unknown
from responses_api.catalogue import catalog
from responses_api.catalogue.mcp_entries import mcp_headers
from responses_api.catalogue.mcp_rules import (
    HEADER_VALUE_MAX,
    headers_error,
    label_error,
    server_url_error,
    tool_names,
    tool_names_error,
)
from responses_api.catalogue.services.backends import may_allow_private
from responses_api.models import McpServer
from responses_api.runtime.secrets import encrypt

MCP_SERVER_FIELDS = (
    "label",
    "server_url",
    "description",
    "transport",
    "allowed_tools",
    "read_only_only",
    "require_approval",
    "approval_exceptions",
    "enabled",
    "allow_private",
)
SECRET_FIELDS = ("headers", "authorization")
DESCRIPTION_MAX = 2000


def mcp_header_names(server: McpServer) -> list[str]:
    """What the console and the API show of the headers: their names."""
    return sorted(mcp_headers(server))


def _label_taken(*, organisation_id: int, server: McpServer | None, label: str) -> bool:
    same = McpServer.objects.filter(organisation_id=organisation_id, label=label)
    if server is not None:
        same = same.exclude(pk=server.pk)
    return same.exists()


def _mcp_clean(
    *,
    organisation_id: int,
    server: McpServer | None,
    values: dict[str, Any],
    check_address: bool = True,
) -> dict[str, Any]:
    """Check a server's fields (all of them, as they would be saved). The
    address is looked up only when ``check_address``."""
    errors = FieldErrors()
    label = values["label"].strip() if isinstance(values["label"], str) else values["label"]
    if message := label_error(label):
        errors.add("label", message)
    elif _label_taken(organisation_id=organisation_id, server=server, label=label):
        errors.add("label", f"An MCP server labelled “{label}” exists already.")
    url = values["server_url"].strip() if isinstance(values["server_url"], str) else None
    allow_private = errors.check(
        lambda: flag_field(values["allow_private"], field="allow_private"), False
    )
    if message := server_url_error(url, allow_private=allow_private if check_address else None):
        errors.add("server_url", message)
    description = values["description"]
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
        errors.add("description", f"Text of at most {DESCRIPTION_MAX} characters.")
    errors.check(
        lambda: choice_field(
            values["transport"], field="transport", choices=McpServer.Transport.values
        ),
        None,
    )
    errors.check(
        lambda: choice_field(
            values["require_approval"], field="require_approval", choices=McpServer.Approval.values
        ),
        None,
    )
    errors.check(lambda: flag_field(values["read_only_only"], field="read_only_only"), None)
    errors.check(lambda: flag_field(values["enabled"], field="enabled"), None)
    allowed = values["allowed_tools"]
    if allowed is not None and (message := tool_names_error(allowed)):
        errors.add("allowed_tools", message)
    if message := tool_names_error(values["approval_exceptions"]):
        errors.add("approval_exceptions", message)
    errors.raise_any()
    return {
        **values,
        "label": label,
        "server_url": url,
        "description": description.strip(),
        "allowed_tools": None if allowed is None else tool_names(allowed),
        "approval_exceptions": tool_names(values["approval_exceptions"]),
    }


def _secrets_apply(server: McpServer, data: Mapping[str, Any]) -> dict[str, Any]:
    """Write-only secrets: a value replaces, None removes, absent (or an
    empty authorization) keeps. What changed is named, never the values."""
    changes: dict[str, Any] = {}
    if "headers" in data:
        headers = data["headers"]
        if headers is not None and (message := headers_error(headers)):
            raise ValidationError({"headers": message})
        if headers:
            server.headers_encrypted = encrypt(json.dumps(dict(headers), sort_keys=True))
            changes["headers"] = sorted(headers)
        elif server.headers_encrypted:
            server.headers_encrypted = ""
            changes["headers"] = "cleared"
    authorization = data.get("authorization", "")
    if authorization is None:
        if server.authorization_encrypted:
            server.authorization_encrypted = ""
            changes["authorization"] = "cleared"
    elif not isinstance(authorization, str) or len(authorization) > HEADER_VALUE_MAX:
        raise ValidationError(
            {"authorization": f"Text of at most {HEADER_VALUE_MAX} characters, or null."}
        )
    elif any(ord(c) < 32 for c in authorization):
        raise ValidationError({"authorization": "No line break or control character."})
    elif authorization.strip():
        server.authorization_encrypted = encrypt(authorization.strip())
        changes["authorization"] = "set"
    return changes


def _mcp_save(server: McpServer, *, actor: Actor, action: str, details: dict[str, Any]) -> None:
    server.updated_at = timezone.now()
    server.save()
    catalog.forget(server.organisation_id)
    audit_record(
        organisation=server.organisation,
        actor=actor,
        action=action,
        target=server.label,
        details={"mcp_server_id": str(server.id), **details},
    )


@transaction.atomic
def mcp_server_create(
    *,
    organisation: Organisation,
    actor: Actor,
    label: str,
    server_url: str,
    description: str = "",
    transport: str = McpServer.Transport.AUTO,
    headers: Mapping[str, str] | None = None,
    authorization: str = "",
    allowed_tools: list[str] | None = None,
    read_only_only: bool = False,
    require_approval: str = McpServer.Approval.ALWAYS,
    approval_exceptions: list[str] | None = None,
    enabled: bool = True,
    allow_private: bool = False,
) -> McpServer:
    """Register an MCP server under ``label``; ``allow_private`` (a private
    or link-local address) is for platform staff only."""
    if allow_private and not may_allow_private(actor):
        raise ValidationError({"allow_private": "Only platform staff may set this."})
    values = _mcp_clean(
        organisation_id=organisation.pk,
        server=None,
        values={
            "label": label,
            "server_url": server_url,
            "description": description,
            "transport": transport,
            "allowed_tools": allowed_tools,
            "read_only_only": read_only_only,
            "require_approval": require_approval,
            "approval_exceptions": approval_exceptions or [],
            "enabled": enabled,
            "allow_private": allow_private,
        },
    )
    server = McpServer(organisation=organisation, **values)
    secrets = _secrets_apply(server, {"headers": headers, "authorization": authorization})
    fields = {f: values[f] for f in MCP_SERVER_FIELDS if f != "description"}
    _mcp_save(server, actor=actor, action="mcp_server.create", details={**fields, **secrets})
    return server


@transaction.atomic
def mcp_server_update(*, server: McpServer, actor: Actor, data: Mapping[str, Any]) -> McpServer:
    """Change some of a server's fields (only the keys given); a change that
    changes nothing writes nothing, audit entry included.

    ``headers``: an object replaces them all, None removes them.
    ``authorization``: a value replaces it, None removes it, empty keeps it.
    ``allow_private`` is changed by platform staff only, and a new URL given
    by anyone else drops it (staff allowed that address, not the next)."""
    refuse_unknown(data, (*MCP_SERVER_FIELDS, *SECRET_FIELDS))
    current = {f: getattr(server, f) for f in MCP_SERVER_FIELDS}
    wanted = {f: data[f] for f in MCP_SERVER_FIELDS if f in data}
    staff = may_allow_private(actor)
    flag = current["allow_private"]
    if not staff and wanted.get("allow_private", flag) != flag:
        raise ValidationError({"allow_private": "Only platform staff may change this."})
    new_url = "server_url" in wanted and (
        str(wanted["server_url"]).strip() != current["server_url"]
    )
    if new_url and not staff:
        wanted["allow_private"] = False
    narrower = flag and wanted.get("allow_private") is False
    values = _mcp_clean(
        organisation_id=server.organisation_id,
        server=server,
        values={**current, **wanted},
        check_address=new_url or narrower,
    )
    changed = [f for f in MCP_SERVER_FIELDS if values[f] != current[f]]
    for field in changed:
        setattr(server, field, values[field])
    secrets = _secrets_apply(server, {f: data[f] for f in SECRET_FIELDS if f in data})
    if not changed and not secrets:
        return server
    _mcp_save(
        server, actor=actor, action="mcp_server.update", details={"changed": changed, **secrets}
    )
    return server


@transaction.atomic
def mcp_server_delete(*, server: McpServer, actor: Actor) -> None:
    organisation, label, server_id = server.organisation, server.label, str(server.id)
    server.delete()
    catalog.forget(organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="mcp_server.delete",
        target=label,
        details={"mcp_server_id": server_id},
    )


def mcp_server_ensure(
    *, organisation: Organisation, label: str, actor: Actor = CLI, **fields: Any
) -> tuple[McpServer, bool]:
    """Create the server, or update the fields given; idempotent, for provisioning."""
    server = McpServer.objects.filter(organisation=organisation, label=label).first()
    if server is None:
        return mcp_server_create(
            organisation=organisation, actor=actor, label=label, **fields
        ), True
    return mcp_server_update(server=server, actor=actor, data=fields), False
