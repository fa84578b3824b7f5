"""The MCP servers an organisation registers (``catalogue.mcp_resolve``)."""

import uuid

from django.db import models
from django.utils import timezone

from accounts.models import Organisation


class McpServer(models.Model):
    """A remote MCP server an organisation registers under a label, so that a
    request's ``{"type": "mcp", "server_label": …}`` tool reaches it with
    the organisation's URL, credentials and rules, whatever the request says
    (``responses_api.catalogue.mcp_resolve``).

    ``headers_encrypted`` (a JSON object) and ``authorization_encrypted`` are
    write-only, stored encrypted (``responses_api.runtime.secrets``)."""

    class Transport(models.TextChoices):
        AUTO = "auto", "Detect"
        STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
        SSE = "sse", "HTTP with SSE"

    class Approval(models.TextChoices):
        ALWAYS = "always", "Always"
        NEVER = "never", "Never"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="mcp_servers"
    )
    label = models.CharField(max_length=64)
    server_url = models.CharField(max_length=500)
    description = models.TextField(blank=True, default="")
    transport = models.CharField(max_length=16, choices=Transport.choices, default=Transport.AUTO)
    headers_encrypted = models.TextField(blank=True, default="")
    authorization_encrypted = models.TextField(blank=True, default="")
    # None: every tool the server lists; else only these names.
    allowed_tools = models.JSONField(null=True, blank=True)
    # Only the tools the server marks read-only (its ``readOnlyHint``).
    read_only_only = models.BooleanField(default=False)
    # Whether a call needs the client's approval, and the tool names that
    # take the other answer.
    require_approval = models.CharField(
        max_length=8, choices=Approval.choices, default=Approval.ALWAYS
    )
    approval_exceptions = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    # As a backend's: set by platform staff only (``catalogue.addresses``).
    allow_private = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["label"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "label"], name="mcp_label_per_org")
        ]

    def __str__(self) -> str:
        return self.label
