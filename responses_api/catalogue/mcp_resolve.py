"""Which MCP server a request's ``{"type": "mcp", …}`` tool reaches, and under
which rules: a pure function of the organisation (its registered servers,
its switch for client-supplied ones) and the tool as sent.

* A registered ``server_label`` wins: its URL, headers, authorization,
  allowed tools and approval rules replace the request's. The request may
  narrow the allowed tools (to those it names, to read-only ones), never
  widen them. Its own ``authorization`` is used only when the registered
  server has none (a per-user token for a shared server); its ``headers``
  and ``server_url`` are ignored.
* Otherwise the request's own ``server_url`` is honoured only where the
  organisation allows client-supplied servers, and always under the
  backend address policy (``catalogue.addresses``): never a link-local or
  cloud metadata address, and a private one only where the platform opens
  private addresses to every backend.
* Another organisation's label is not in ``servers``: it is "unknown", like
  a label nobody registered.

No name is looked up here (a request's path must not wait on DNS): an IP
literal and a metadata name are judged now; the MCP client connects with
``PolicyResolver(resolved.policy)``, which judges every address a name
resolves to when the connection is made.

OpenAI's reference: https://platform.openai.com/docs/guides/tools-remote-mcp
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from responses_api.catalogue.addresses import AddressPolicy, backend_policy, refused_message
from responses_api.catalogue.mcp_entries import McpOrganisation, McpServerEntry
from responses_api.catalogue.mcp_rules import (
    HEADER_VALUE_MAX,
    SUBJECT,
    headers_error,
    label_error,
    server_url_error,
    tool_names,
    tool_names_error,
)
from responses_api.protocol.errors import ApiError, invalid

ALWAYS, NEVER = "always", "never"


@dataclass(frozen=True, slots=True)
class ResolvedMcpServer:
    label: str
    server_url: str
    transport: str
    headers: Mapping[str, str]
    authorization: str
    # None: every tool the server lists.
    allowed_tools: frozenset[str] | None
    read_only: bool
    require_approval: str
    approval_exceptions: frozenset[str]
    # The addresses the client may connect to (``PolicyResolver``).
    policy: AddressPolicy
    # Registered by the organisation, as opposed to named by the request.
    registered: bool
    description: str = ""

    def allows(self, tool_name: str, *, read_only_hint: bool = False) -> bool:
        """Whether a tool the server lists may be offered to the model."""
        if self.read_only and not read_only_hint:
            return False
        return self.allowed_tools is None or tool_name in self.allowed_tools

    def needs_approval(self, tool_name: str) -> bool:
        default = self.require_approval == ALWAYS
        return not default if tool_name in self.approval_exceptions else default

    def __repr__(self) -> str:
        # Never the headers or the authorization, whoever logs this.
        return f"ResolvedMcpServer(label={self.label!r}, server_url={self.server_url!r})"


def resolve_mcp_tool(
    organisation: McpOrganisation, tool: Mapping[str, Any], *, index: int
) -> ResolvedMcpServer | ApiError:
    """The server ``tools[index]`` reaches, or the 400 (OpenAI's envelope,
    ``param`` naming the field) that refuses it."""
    where = f"tools[{index}]"
    label = tool.get("server_label")
    if message := label_error(label):
        return invalid(message, param=f"{where}.server_label", code="invalid_value")
    assert isinstance(label, str)
    if tool.get("connector_id") is not None:
        return invalid(
            "Connectors are not available here: name a registered server_label or a server_url.",
            param=f"{where}.connector_id",
            code="unsupported_parameter",
        )
    narrowing = _allowed_tools(tool.get("allowed_tools"), f"{where}.allowed_tools")
    if isinstance(narrowing, ApiError):
        return narrowing
    authorization = tool.get("authorization")
    if authorization is not None and (
        not isinstance(authorization, str)
        or len(authorization) > HEADER_VALUE_MAX
        or any(ord(c) < 32 for c in authorization)
    ):
        return invalid(
            f"authorization is text of at most {HEADER_VALUE_MAX} characters, on one line.",
            param=f"{where}.authorization",
            code="invalid_value",
        )
    registered = organisation.servers.get(label)
    if registered is not None:
        return _registered(registered, narrowing, authorization or "", where)
    if tool.get("server_url") is None:
        return invalid(
            f"Unknown server_label '{label}': no MCP server is registered under this label "
            "in your organisation. Register it, or give a server_url.",
            param=f"{where}.server_label",
            code="unknown_server_label",
        )
    if not organisation.allow_client_servers:
        return invalid(
            "This organisation does not allow MCP servers named by the request: use the "
            "server_label of a registered server.",
            param=f"{where}.server_url",
            code="client_mcp_servers_not_allowed",
        )
    return _client_server(tool, label, narrowing, authorization or "", where)


def _registered(
    server: McpServerEntry,
    narrowing: tuple[frozenset[str] | None, bool],
    authorization: str,
    where: str,
) -> ResolvedMcpServer | ApiError:
    if not server.enabled:
        return invalid(
            f"The MCP server '{server.label}' is disabled in this organisation.",
            param=f"{where}.server_label",
            code="mcp_server_disabled",
        )
    names, read_only = narrowing
    allowed = server.allowed_tools
    if names is not None:
        allowed = names if allowed is None else allowed & names
    return ResolvedMcpServer(
        label=server.label,
        server_url=server.server_url,
        transport=server.transport,
        headers=dict(server.headers),
        authorization=server.authorization or authorization,
        allowed_tools=allowed,
        read_only=server.read_only_only or read_only,
        require_approval=server.require_approval,
        approval_exceptions=server.approval_exceptions,
        policy=backend_policy(allow_private=server.allow_private),
        registered=True,
        description=server.description,
    )


def _client_server(
    tool: Mapping[str, Any],
    label: str,
    narrowing: tuple[frozenset[str] | None, bool],
    authorization: str,
    where: str,
) -> ResolvedMcpServer | ApiError:
    url = tool.get("server_url")
    policy = backend_policy(allow_private=False)
    message = server_url_error(url, allow_private=None)
    if message is None:
        assert isinstance(url, str)
        host = urlsplit(url).hostname or ""
        kind = "cloud metadata" if policy.refuses_name(host) else policy.refusal(host)
        if kind:
            message = refused_message(host, kind, resolved=False, subject=SUBJECT)
    if message:
        return invalid(message, param=f"{where}.server_url", code="invalid_value")
    headers = tool.get("headers")
    if headers is None:
        headers = {}
    if message := headers_error(headers):
        return invalid(message, param=f"{where}.headers", code="invalid_value")
    approval = _approval(tool.get("require_approval"), f"{where}.require_approval")
    if isinstance(approval, ApiError):
        return approval
    names, read_only = narrowing
    description = tool.get("server_description")
    assert isinstance(url, str)
    return ResolvedMcpServer(
        label=label,
        server_url=url,
        transport="auto",
        headers=dict(headers),
        authorization=authorization,
        allowed_tools=names,
        read_only=read_only,
        require_approval=approval[0],
        approval_exceptions=approval[1],
        policy=policy,
        registered=False,
        description=description if isinstance(description, str) else "",
    )


def _allowed_tools(value: object, param: str) -> tuple[frozenset[str] | None, bool] | ApiError:
    """A request's ``allowed_tools``: a list of names, or the filter
    ``{"tool_names": [...], "read_only": bool}``; (names or None, read-only)."""
    if value is None:
        return None, False
    read_only = False
    names: object = value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"tool_names", "read_only"})
        if unknown:
            return invalid(f"Unknown parameter: '{param}.{unknown[0]}'.", param=param)
        names, flag = value.get("tool_names"), value.get("read_only", False)
        if not isinstance(flag, bool):
            return invalid("read_only is true or false.", param=f"{param}.read_only")
        read_only = flag
        if names is None:
            return None, read_only
    if message := tool_names_error(names):
        return invalid(message, param=param, code="invalid_value")
    assert isinstance(names, list | tuple)
    return frozenset(tool_names(names)), read_only


def _approval(value: object, param: str) -> tuple[str, frozenset[str]] | ApiError:
    """A request's ``require_approval``: "always", "never", or
    ``{"always": {"tool_names": [...]}, "never": {"tool_names": [...]}}``,
    where a tool named in neither needs approval (OpenAI's default)."""
    if value is None or value == ALWAYS:
        return ALWAYS, frozenset()
    if value == NEVER:
        return NEVER, frozenset()
    if not isinstance(value, Mapping) or set(value) - {ALWAYS, NEVER}:
        return invalid(
            "require_approval is 'always', 'never', or an object of 'always' and 'never' "
            "tool filters.",
            param=param,
        )
    never = value.get(NEVER, {})
    if not isinstance(never, Mapping) or set(never) - {"tool_names"}:
        return invalid("A filter of tool_names only.", param=f"{param}.never")
    names = never.get("tool_names", [])
    if message := tool_names_error(names):
        return invalid(message, param=f"{param}.never.tool_names")
    return ALWAYS, frozenset(tool_names(names))
