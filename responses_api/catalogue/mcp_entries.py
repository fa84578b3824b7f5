"""An organisation's registered MCP servers as the tool loop reads them:
loaded with its catalogue (``catalog.mcp_servers_for``), so they are cached
per process and forgotten on the same writes; the secrets are decrypted
here, for the loop only, and never leave this process in a log or an answer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from responses_api.runtime.secrets import decrypt

if TYPE_CHECKING:
    from responses_api.models import McpServer


@dataclass(frozen=True, slots=True)
class McpServerEntry:
    id: str
    label: str
    server_url: str
    description: str
    transport: str
    # Decrypted: sent to the server, never shown.
    headers: dict[str, str]
    authorization: str
    # None: every tool the server lists.
    allowed_tools: frozenset[str] | None
    read_only_only: bool
    # "always" or "never", and the tool names that take the other answer.
    require_approval: str
    approval_exceptions: frozenset[str]
    enabled: bool
    allow_private: bool

    def __repr__(self) -> str:
        # A dataclass repr would print the secrets into any log of the entry.
        return f"McpServerEntry(label={self.label!r}, server_url={self.server_url!r})"


@dataclass(frozen=True, slots=True)
class McpOrganisation:
    """What the resolver (``catalogue.mcp_resolve``) needs of an organisation:
    its registered servers by label, and whether a request may name its
    own server (``Organisation.allow_client_mcp_servers``)."""

    servers: Mapping[str, McpServerEntry] = field(default_factory=dict)
    allow_client_servers: bool = False


def mcp_headers(server: McpServer) -> dict[str, str]:
    """The stored headers, decrypted: for the tool loop and for naming them."""
    text = decrypt(server.headers_encrypted)
    return dict(json.loads(text)) if text else {}


def load_mcp_organisation(organisation_id: int) -> McpOrganisation:
    """The organisation's servers and switch (blocking: two queries)."""
    from accounts.models import Organisation
    from responses_api.models import McpServer

    allow = Organisation.objects.filter(pk=organisation_id).values_list(
        "allow_client_mcp_servers", flat=True
    )
    servers = {
        server.label: McpServerEntry(
            id=str(server.id),
            label=server.label,
            server_url=server.server_url,
            description=server.description,
            transport=server.transport,
            headers=mcp_headers(server),
            authorization=decrypt(server.authorization_encrypted),
            allowed_tools=None if server.allowed_tools is None else frozenset(server.allowed_tools),
            read_only_only=server.read_only_only,
            require_approval=server.require_approval,
            approval_exceptions=frozenset(server.approval_exceptions or ()),
            enabled=server.enabled,
            allow_private=server.allow_private,
        )
        for server in McpServer.objects.filter(organisation_id=organisation_id)
    }
    return McpOrganisation(servers=servers, allow_client_servers=bool(allow.first()))
