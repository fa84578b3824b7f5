"""The form of the web search page. The API key is write-only: the field is
always empty, and empty keeps what is stored."""

from __future__ import annotations

from typing import Any

from django import forms

from console.forms.common import ServiceForm
from responses_api.models import WebSearchProvider


class WebSearchForm(ServiceForm):
    api_key = forms.CharField(
        required=False,
        strip=True,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Brave's subscription token or Tavily's key (a SearXNG instance needs none). "
        "Write-only: stored encrypted and never shown again. Leave empty to keep it.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")

    class Meta:
        model = WebSearchProvider
        fields = ["kind", "base_url", "mcp_server_label", "mcp_tool", "enabled"]
        labels = {
            "kind": "Provider",
            "base_url": "Base URL",
            "mcp_server_label": "MCP server label",
            "mcp_tool": "MCP search tool",
        }
        help_texts = {
            "base_url": "SearXNG: the instance's URL (its JSON format enabled); Brave: "
            "https://api.search.brave.com; Tavily: https://api.tavily.com.",
            "mcp_server_label": "For an MCP server's tool: the label of a registered server.",
            "mcp_tool": 'Its search tool, called with {"query": …}.',
        }

    def __init__(self, *args: Any, staff: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("base_url", "mcp_server_label", "mcp_tool"):
            self.fields[name].required = False
        if self.instance._state.adding:
            del self.fields["clear_api_key"]
        if staff:
            self.fields["allow_private"] = forms.BooleanField(
                required=False,
                initial=bool(self.instance.allow_private),
                label="Allow a private address",
                help_text="Platform staff: this provider may sit on a loopback, private or "
                "link-local address.",
            )

    def service_data(self) -> dict[str, Any]:
        """The fields as ``web_search_bind`` takes them."""
        data = {f: self.cleaned_data[f] or "" for f in self.Meta.fields if f != "enabled"}
        data["enabled"] = self.cleaned_data["enabled"]
        if "allow_private" in self.fields:
            data["allow_private"] = self.cleaned_data["allow_private"]
        if self.cleaned_data["api_key"]:
            data["api_key"] = self.cleaned_data["api_key"]
        elif self.cleaned_data.get("clear_api_key"):
            data["api_key"] = None
        return data
