"""The form of an MCP server's page. The headers and the authorization are
write-only: the fields are always empty, and empty keeps what is stored."""

from __future__ import annotations

from typing import Any

from django import forms

from console.forms.common import ServiceForm
from responses_api.models import McpServer


class WriteOnlyTextarea(forms.Textarea):
    """Never renders a value, not even the one just submitted with an error
    on another field: as a password field does, so a page never holds a secret."""

    def format_value(self, value: Any) -> None:
        return None


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.replace("\n", ",").split(",") if name.strip()]


class McpServerForm(ServiceForm):
    headers = forms.CharField(
        required=False,
        label="Headers",
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="One “Name: value” a line. Write-only: stored encrypted and never shown "
        "again; what you write replaces every stored header. Leave empty to keep them.",
    )
    clear_headers = forms.BooleanField(required=False, label="Remove the stored headers")
    authorization = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="The Authorization header's value (e.g. Bearer …). Write-only: stored "
        "encrypted and never shown again. Leave empty to keep the current one.",
    )
    clear_authorization = forms.BooleanField(
        required=False, label="Remove the stored authorization"
    )
    server_url = forms.CharField(
        label="Server URL", max_length=500, help_text="e.g. https://mcp.example.com/mcp"
    )
    allowed_tools = forms.CharField(
        required=False,
        help_text="Tool names separated by commas; empty: every tool the server lists. "
        "A request may narrow this list, never widen it.",
    )
    approval_exceptions = forms.CharField(
        required=False,
        label="Approval exceptions",
        help_text="Tool names, separated by commas, that take the other answer.",
    )

    class Meta:
        model = McpServer
        fields = ["label", "server_url", "description", "transport", "read_only_only"]
        fields += ["require_approval", "enabled"]
        labels = {"read_only_only": "Read-only tools only", "require_approval": "Needs approval"}
        help_texts = {
            "label": "What requests name as server_label: a letter, then letters, digits, _ or -.",
            "require_approval": "Whether a call needs the client's approval; overrides the "
            "request's.",
        }

    def __init__(self, *args: Any, staff: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["description"].widget.attrs["rows"] = 2
        if self.instance._state.adding:
            del self.fields["clear_headers"], self.fields["clear_authorization"]
        else:
            tools = self.instance.allowed_tools
            self.initial["allowed_tools"] = ", ".join(tools) if tools is not None else ""
            self.initial["approval_exceptions"] = ", ".join(self.instance.approval_exceptions)
        if staff:
            self.fields["allow_private"] = forms.BooleanField(
                required=False,
                initial=bool(self.instance.allow_private),
                label="Allow a private address",
                help_text="Platform staff: this server may sit on a loopback, private, "
                "link-local or cloud metadata address.",
            )

    def clean_headers(self) -> dict[str, str] | None:
        text = self.cleaned_data.get("headers") or ""
        if not text.strip():
            return None
        headers: dict[str, str] = {}
        for line in filter(str.strip, text.splitlines()):
            name, colon, value = line.partition(":")
            if not colon or not name.strip():
                raise forms.ValidationError("Write each header as “Name: value”.")
            headers[name.strip()] = value.strip()
        return headers

    def service_data(self) -> dict[str, Any]:
        """The fields as ``mcp_server_create``/``mcp_server_update`` take them."""
        data = {f: self.cleaned_data[f] for f in self.Meta.fields}
        tools = _names(self.cleaned_data["allowed_tools"])
        data["allowed_tools"] = tools or None
        data["approval_exceptions"] = _names(self.cleaned_data["approval_exceptions"])
        if "allow_private" in self.fields:
            data["allow_private"] = self.cleaned_data["allow_private"]
        if self.cleaned_data["headers"] is not None:
            data["headers"] = self.cleaned_data["headers"]
        elif self.cleaned_data.get("clear_headers"):
            data["headers"] = None
        if self.cleaned_data["authorization"]:
            data["authorization"] = self.cleaned_data["authorization"]
        elif self.cleaned_data.get("clear_authorization"):
            data["authorization"] = None
        return data
