"""MCP servers, as the management API shows and takes them: the headers and
the authorization are write-only (their names and presence are shown)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from admin_api.serializers.base import (
    ObjectTypeField,
    PlatformGuardedSerializer,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
)
from responses_api.catalogue.mcp_rules import HEADER_VALUE_MAX, TOOL_NAME_MAX, TOOLS_MAX
from responses_api.catalogue.services.mcp_servers import DESCRIPTION_MAX, mcp_header_names
from responses_api.models import McpServer


def _tool_names(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=StrictCharField(max_length=TOOL_NAME_MAX), max_length=TOOLS_MAX, **kwargs
    )


class McpServerSerializer(PlatformGuardedSerializer):
    id = serializers.UUIDField(read_only=True)
    object = ObjectTypeField("mcp_server")
    # A declared field; DRF's metaclass takes it off the class, so it never
    # shadows Field.label as the type checker thinks.
    label = StrictCharField(  # type: ignore[assignment]
        max_length=64,
        help_text="What requests name as server_label: a letter, then letters, digits, _ or -.",
    )
    server_url = StrictCharField(max_length=500)
    description = StrictCharField(max_length=DESCRIPTION_MAX, required=False, allow_blank=True)
    transport = StrictChoiceField(choices=McpServer.Transport.choices, required=False)
    headers = serializers.DictField(
        child=StrictCharField(max_length=HEADER_VALUE_MAX, allow_blank=True, trim_whitespace=False),
        write_only=True,
        required=False,
        allow_null=True,
        help_text="Write-only, stored encrypted: sent to the server on every call. An object "
        "replaces them all, null removes them, absent keeps them.",
    )
    header_names = serializers.SerializerMethodField()
    authorization = StrictCharField(
        write_only=True,
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=HEADER_VALUE_MAX,
        help_text="Write-only, stored encrypted: the server's Authorization header value. "
        "null removes it; empty or absent keeps it.",
    )
    has_authorization = serializers.SerializerMethodField()
    allowed_tools = _tool_names(
        required=False,
        allow_null=True,
        help_text="The tools requests may use; null: every tool the server lists. A request "
        "may narrow this list, never widen it.",
    )
    read_only_only = StrictBooleanField(
        required=False, help_text="Only the tools the server marks read-only."
    )
    require_approval = StrictChoiceField(
        choices=McpServer.Approval.choices,
        required=False,
        help_text="Whether a call needs the client's approval; overrides the request's.",
    )
    approval_exceptions = _tool_names(
        required=False, help_text="Tool names that take the other answer than require_approval."
    )
    enabled = StrictBooleanField(required=False)
    allow_private = serializers.BooleanField(
        read_only=True,
        help_text="Platform staff let this server sit on a private or link-local address: "
        "read-only here.",
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_header_names(self, server: McpServer) -> list[str]:
        return mcp_header_names(server)

    def get_has_authorization(self, server: McpServer) -> bool:
        return bool(server.authorization_encrypted)
