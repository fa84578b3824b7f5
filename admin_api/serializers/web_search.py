"""The organisation's web search provider, as the management API shows and
takes it: the API key is write-only (its presence is shown)."""

from __future__ import annotations

from rest_framework import serializers

from admin_api.serializers.base import (
    ObjectTypeField,
    PlatformGuardedSerializer,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
)
from responses_api.catalogue.mcp_rules import HEADER_VALUE_MAX
from responses_api.catalogue.services.web_search import TOOL_NAME_MAX
from responses_api.models import WebSearchProvider


class WebSearchProviderSerializer(PlatformGuardedSerializer):
    id = serializers.UUIDField(read_only=True)
    object = ObjectTypeField("web_search_provider")
    kind = StrictChoiceField(
        choices=WebSearchProvider.Kind.choices,
        required=False,
        help_text="searxng, brave, tavily, or mcp (a search tool of a registered MCP server).",
    )
    base_url = StrictCharField(
        max_length=500,
        required=False,
        allow_blank=True,
        help_text="The API's base URL (SearXNG: the instance's; Brave: "
        "https://api.search.brave.com; Tavily: https://api.tavily.com). Not for mcp.",
    )
    api_key = StrictCharField(
        write_only=True,
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=HEADER_VALUE_MAX,
        help_text="Write-only, stored encrypted. null removes it; empty or absent keeps it.",
    )
    has_api_key = serializers.SerializerMethodField()
    mcp_server_label = StrictCharField(
        max_length=64,
        required=False,
        allow_blank=True,
        help_text="For mcp: the label of the registered MCP server.",
    )
    mcp_tool = StrictCharField(
        max_length=TOOL_NAME_MAX,
        required=False,
        allow_blank=True,
        help_text='For mcp: the name of its search tool, called with {"query": …}.',
    )
    enabled = StrictBooleanField(required=False)
    allow_private = serializers.BooleanField(
        read_only=True,
        help_text="Platform staff let this provider sit on a private or link-local address: "
        "read-only here.",
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)

    def get_has_api_key(self, provider: WebSearchProvider) -> bool:
        return bool(provider.api_key_encrypted)
