"""The forms of the organisation's pages: its API keys and admin keys, its
members and invitations, and its settings."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import password_validation

from accounts.limits import (
    BUDGET_DIGITS,
    BUDGET_MAX,
    BUDGET_MIN,
    BUDGET_PLACES,
    TOKENS_MAX,
    WARNING_PERCENT_MAX,
)
from accounts.models import AdminApiKey, Membership, Organisation
from accounts.services.organisations import SETTINGS_FIELDS
from console.forms.common import DateTimeLocalInput, ServiceForm, at_least_one, set_choices

ROLE_CHOICES = Membership.Role.choices


def _limit(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, min_value=1, help_text=help_text)


def _budget(help_text: str) -> forms.DecimalField:
    return forms.DecimalField(
        label="Monthly budget",
        required=False,
        min_value=BUDGET_MIN,
        max_value=BUDGET_MAX - BUDGET_MIN,
        max_digits=BUDGET_DIGITS,
        decimal_places=BUDGET_PLACES,
        help_text=help_text,
    )


def _tokens(help_text: str) -> forms.IntegerField:
    return forms.IntegerField(
        label="Monthly tokens",
        required=False,
        min_value=1,
        max_value=TOKENS_MAX,
        help_text=help_text,
    )


SPEND_HELP = (
    "Per calendar month (UTC), in the organisation's currency; once reached, "
    "requests are refused (429 insufficient_quota) until the month ends. Empty: no budget."
)
TOKENS_HELP = "Input + output tokens per calendar month (UTC). Empty: no quota."


# --- API keys ----------------------------------------------------------------


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="So you can tell keys apart, e.g. “CI”.")
    allowed_models = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: the key may use every model of the organisation.",
    )
    rpm = _limit("Requests per minute", "Empty: the organisation's default.")
    tpm = _limit("Tokens per minute", "Empty: the organisation's default.")
    concurrency = _limit("Concurrent requests", "Empty: the organisation's default.")
    expires_at = forms.DateTimeField(
        required=False,
        label="Expires",
        widget=DateTimeLocalInput(),
        help_text="Empty: never expires. Times are UTC.",
    )
    monthly_budget = _budget(SPEND_HELP + " The organisation's own limits apply as well.")
    monthly_tokens = _tokens(TOKENS_HELP)

    def __init__(self, *args, model_ids: list[str], currency: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        set_choices(self, "allowed_models", [(m, m) for m in model_ids])
        if currency:
            self.fields["monthly_budget"].label = f"Monthly budget ({currency})"


# --- Members, invitations and settings ------------------------------------


class MemberAddForm(forms.Form):
    email = forms.EmailField(label="Email of an existing user")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Membership.Role.DEVELOPER)


class InviteForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Membership.Role.DEVELOPER)


class AdminKeyForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="What uses it, e.g. “CI provisioning”.")
    role = forms.ChoiceField(
        choices=AdminApiKey.Role.choices,
        initial=AdminApiKey.Role.VIEWER,
        help_text="Viewer keys read everything and change nothing.",
    )
    scopes = forms.MultipleChoiceField(
        choices=AdminApiKey.Scope.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Also for",
        help_text="SCIM provisioning: an identity provider (Okta, Entra ID) manages "
        "members at /scim/v2/; needs the admin role to change anything.",
    )
    expires_at = forms.DateTimeField(
        required=False,
        label="Expires",
        widget=DateTimeLocalInput(),
        help_text="Empty: never expires. Times are UTC.",
    )


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class AcceptInvitationForm(forms.Form):
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput, strip=False)
    password2 = forms.CharField(label="Password again", widget=forms.PasswordInput, strip=False)

    def __init__(self, *args, email: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.email = email

    def clean(self):
        data = super().clean()
        one, two = data.get("password1"), data.get("password2")
        if one and two and one != two:
            self.add_error("password2", "The two passwords differ.")
        elif one:
            from django.contrib.auth import get_user_model

            probe = get_user_model()(username=self.email, email=self.email)
            try:
                password_validation.validate_password(one, probe)
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


class OrganisationSettingsForm(ServiceForm):
    class Meta:
        model = Organisation
        fields = list(SETTINGS_FIELDS)
        labels = {
            "retention_policy": "Stored responses",
            "store_ttl_hours": "Keep stored responses for (hours)",
            "usage_retention_days": "Keep usage rows for (days)",
            "default_rpm": "Default requests per minute",
            "default_tpm": "Default tokens per minute",
            "default_concurrency": "Default concurrent requests",
            "monthly_budget": "Monthly budget",
            "monthly_tokens": "Monthly tokens",
            "currency": "Currency",
            "budget_warning_percent": "Warn past (% of a monthly limit)",
            "allow_client_mcp_servers": "Allow MCP servers named by requests",
            "file_quota_bytes": "File quota (bytes)",
        }
        help_texts = {
            "monthly_budget": SPEND_HELP + " Counts every key of the organisation.",
            "monthly_tokens": TOKENS_HELP,
            "currency": "ISO 4217 code of the model prices, hence of every cost and budget, "
            "e.g. USD or EUR. Amounts are named in it, never converted.",
            "budget_warning_percent": "Past this share of a monthly limit (the organisation's "
            "or a key's), responses carry the notice budget_near_limit and the console a badge.",
            "retention_policy": "“Store nothing” is zero data retention: previous_response_id "
            "and GET /v1/responses/{id} are refused.",
            "default_rpm": "Applies to the whole organisation and to keys without their own limit.",
            "allow_client_mcp_servers": "Off: an mcp tool reaches only the servers registered "
            "under MCP servers. On: a request may also give its own server_url (never a "
            "link-local or cloud metadata address).",
            "file_quota_bytes": "Bytes of uploaded files (Files API) the organisation may keep in "
            "all. Empty: the platform's default.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        at_least_one(
            self,
            "store_ttl_hours",
            "usage_retention_days",
            "default_rpm",
            "default_tpm",
            "default_concurrency",
            "monthly_tokens",
            "budget_warning_percent",
            "file_quota_bytes",
        )
        if self.instance.pk:
            self.fields["monthly_budget"].label = f"Monthly budget ({self.instance.currency})"
        warning = self.fields["budget_warning_percent"]
        warning.widget.attrs["max"] = WARNING_PERCENT_MAX
        warning.required = False  # left empty: unchanged
        self.fields["currency"].required = False  # left empty: unchanged

    def service_data(self) -> dict[str, Any]:
        data = {f: self.cleaned_data[f] for f in self.Meta.fields}
        if data["budget_warning_percent"] is None:
            del data["budget_warning_percent"]
        if not data["currency"]:
            del data["currency"]
        return data
