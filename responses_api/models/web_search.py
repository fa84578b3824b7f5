"""The search provider an organisation binds to ``web_search`` (``tools.web_search``)."""

import uuid

from django.db import models
from django.utils import timezone

from accounts.models import Organisation


class WebSearchProvider(models.Model):
    """Where the gateway searches when a request of the organisation offers
    ``{"type": "web_search"}`` (or one of its dated names): a SearXNG
    instance, a commercial API (Brave Search, Tavily), or a search tool of one
    of the organisation's registered MCP servers. One per organisation; none:
    the tool is dropped with a notice (docs/api/web-search.md).

    ``api_key_encrypted`` is write-only, stored encrypted
    (``responses_api.runtime.secrets``)."""

    class Kind(models.TextChoices):
        SEARXNG = "searxng", "SearXNG"
        BRAVE = "brave", "Brave Search"
        TAVILY = "tavily", "Tavily"
        MCP = "mcp", "An MCP server's tool"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.OneToOneField(
        Organisation, on_delete=models.CASCADE, related_name="web_search_provider"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # The API's base URL (SearXNG: the instance's); blank for an MCP tool.
    base_url = models.CharField(max_length=500, blank=True, default="")
    api_key_encrypted = models.TextField(blank=True, default="")
    # An MCP tool: the registered server's label and the tool's name.
    mcp_server_label = models.CharField(max_length=64, blank=True, default="")
    mcp_tool = models.CharField(max_length=128, blank=True, default="")
    enabled = models.BooleanField(default=True)
    # As a backend's: set by platform staff only (``catalogue.addresses``).
    allow_private = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.get_kind_display()} for {self.organisation_id}"
