"""Console forms: validation at the edge, with messages a person can act on."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

from django import forms
from django.contrib.auth import password_validation
from django.core.validators import MinValueValidator
from django.utils import timezone

from accounts.models import Membership, Organisation
from console.services import MODEL_FIELDS
from responses_api.models import Backend, ServedModel


def clean_request_id(value: str) -> str:
    """A request id filter: empty, or a UUID in its canonical form."""
    value = value.strip()
    if not value:
        return ""
    try:
        return str(uuid.UUID(value))
    except ValueError as exc:
        raise forms.ValidationError("A request id is a UUID.") from exc


ROLE_CHOICES = Membership.Role.choices


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, **kwargs):
        super().__init__(format="%Y-%m-%dT%H:%M", **kwargs)


def _at_least_one(form: forms.BaseForm, *names: str) -> None:
    for name in names:
        field = form.fields[name]
        field.validators.append(MinValueValidator(1, "At least 1."))
        field.widget.attrs["min"] = 1


def _limit(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, min_value=1, help_text=help_text)


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

    def __init__(self, *args, model_ids: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["allowed_models"].choices = [(m, m) for m in model_ids]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the key a name.")
        return name

    def clean_expires_at(self):
        value = self.cleaned_data.get("expires_at")
        if value is not None and value <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return value


# --- Backends ----------------------------------------------------------------


class BackendForm(forms.ModelForm):
    upstream_key = forms.CharField(
        required=False,
        label="Upstream API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: it is stored encrypted and never shown again. "
        "Leave empty to keep the current one.",
    )
    base_url = forms.URLField(
        label="Base URL",
        max_length=500,
        assume_scheme="http",
        help_text="The OpenAI-compatible root, ending in /v1, e.g. http://gpu1:8000/v1",
    )
    clear_upstream_key = forms.BooleanField(required=False, label="Remove the stored upstream key")

    class Meta:
        model = Backend
        fields = ["name", "base_url", "dialect", "max_concurrency", "enabled"]
        labels = {"base_url": "Base URL", "max_concurrency": "Max concurrent requests"}
        help_texts = {
            "base_url": "The OpenAI-compatible root, ending in /v1, e.g. http://gpu1:8000/v1",
            "dialect": "Decides how reasoning and thinking budgets are passed.",
        }

    def __init__(self, *args, organisation: Organisation, **kwargs):
        super().__init__(*args, **kwargs)
        self.organisation = organisation
        _at_least_one(self, "max_concurrency")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        clash = Backend.objects.filter(organisation=self.organisation, name=name)
        if self.instance.pk:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise forms.ValidationError(f"A backend named “{name}” exists already.")
        return name

    def clean_base_url(self) -> str:
        url = self.cleaned_data["base_url"].strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise forms.ValidationError("Use an http:// or https:// URL.")
        return url


# --- Models ------------------------------------------------------------------


class ServedModelForm(forms.ModelForm):
    aliases = forms.CharField(
        required=False,
        help_text="Other names clients may use, separated by commas.",
    )

    class Meta:
        model = ServedModel
        fields = list(MODEL_FIELDS)
        labels = {
            "public_id": "Model id",
            "default_max_output_tokens": "Default max output tokens",
            "top_p": "Top p",
            "price_input": "Price per 1M input tokens",
            "price_cached_input": "Price per 1M cached input tokens",
            "price_output": "Price per 1M output tokens",
        }
        help_texts = {
            "public_id": "What clients put in “model”, e.g. qwen3-32b.",
            "temperature": "Recommended; used when a request sets none.",
            "top_p": "Recommended; used when a request sets none.",
        }

    def __init__(self, *args, organisation: Organisation, **kwargs):
        super().__init__(*args, **kwargs)
        self.organisation = organisation
        if self.instance.pk:
            self.initial["aliases"] = ", ".join(self.instance.aliases or [])
        _at_least_one(self, "context_window", "max_output_tokens", "default_max_output_tokens")

    def _taken(self) -> set[str]:
        others = ServedModel.objects.filter(organisation=self.organisation)
        if self.instance.pk:
            others = others.exclude(pk=self.instance.pk)
        taken = set()
        for public_id, aliases in others.values_list("public_id", "aliases"):
            taken.add(public_id)
            taken.update(aliases or [])
        return taken

    def clean_public_id(self) -> str:
        value = self.cleaned_data["public_id"].strip()
        if not value or any(c.isspace() for c in value):
            raise forms.ValidationError("A model id has no spaces.")
        if value in self._taken():
            raise forms.ValidationError(f"“{value}” is already a model id or alias.")
        return value

    def clean_aliases(self) -> list[str]:
        raw = self.cleaned_data.get("aliases") or ""
        aliases = [a.strip() for a in raw.split(",") if a.strip()]
        bad = [a for a in aliases if any(c.isspace() for c in a)]
        if bad:
            raise forms.ValidationError(f"An alias has no spaces: “{bad[0]}”.")
        taken = self._taken() & set(aliases)
        if taken:
            raise forms.ValidationError(f"“{sorted(taken)[0]}” already names another model.")
        return list(dict.fromkeys(aliases))

    def clean_temperature(self):
        value = self.cleaned_data.get("temperature")
        if value is not None and not 0 <= value <= 2:
            raise forms.ValidationError("Between 0 and 2.")
        return value

    def clean_top_p(self):
        value = self.cleaned_data.get("top_p")
        if value is not None and not 0 < value <= 1:
            raise forms.ValidationError("Greater than 0 and at most 1.")
        return value

    def clean(self):
        data = super().clean()
        if data.get("public_id") and data.get("public_id") in (data.get("aliases") or []):
            self.add_error("aliases", "An alias cannot repeat the model id.")
        cap, default = data.get("max_output_tokens"), data.get("default_max_output_tokens")
        if cap and default and default > cap:
            self.add_error("default_max_output_tokens", "Cannot exceed the max output tokens.")
        window = data.get("context_window")
        if window and cap and cap > window:
            self.add_error("max_output_tokens", "Cannot exceed the context window.")
        for name in ("price_input", "price_cached_input", "price_output"):
            value = data.get(name)
            if value is not None and value < Decimal(0):
                self.add_error(name, "A price cannot be negative.")
        return data


class DeploymentForm(forms.Form):
    backend = forms.ChoiceField(help_text="A backend that serves this model.")
    upstream_name = forms.CharField(
        max_length=200, help_text="The model's name on that backend, e.g. Qwen/Qwen3-32B."
    )

    def __init__(self, *args, backends, **kwargs):
        super().__init__(*args, **kwargs)
        self.backends = {str(b.id): b for b in backends}
        self.fields["backend"].choices = [(str(b.id), b.name) for b in backends]

    def clean_backend(self) -> Backend:
        return self.backends[self.cleaned_data["backend"]]


# --- Usage -------------------------------------------------------------------

STATUS_CHOICES = [
    ("", "Any status"),
    ("200", "200 OK"),
    ("4xx", "4xx client errors (not 499)"),
    ("429", "429 rate limited"),
    ("499", "499 client disconnected"),
    ("5xx", "5xx server errors"),
]
STREAM_CHOICES = [("", "Stream or not"), ("yes", "Streamed"), ("no", "Not streamed")]
RANGE_CHOICES = [
    ("", "Any time"),
    ("1h", "Last hour"),
    ("24h", "Last 24 hours"),
    ("7d", "Last 7 days"),
    ("30d", "Last 30 days"),
]
RANGES = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


class UsageFilterForm(forms.Form):
    request_id = forms.CharField(
        required=False, label="Request id", widget=forms.TextInput(attrs={"placeholder": "uuid"})
    )
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    model = forms.ChoiceField(required=False)
    key = forms.ChoiceField(required=False, label="API key")
    backend = forms.ChoiceField(required=False)
    stream = forms.ChoiceField(required=False, choices=STREAM_CHOICES)
    range = forms.ChoiceField(required=False, choices=RANGE_CHOICES, label="Time")
    since = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="From")
    until = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="To")

    def __init__(self, *args, models: list[str], keys, backends, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = [("", "Any model")] + [(m, m) for m in models]
        self.fields["key"].choices = [("", "Any key")] + [
            (str(k.id), f"{k.name} ({k.prefix}…)") for k in keys
        ]
        self.fields["backend"].choices = [("", "Any backend")] + [
            (str(b.id), b.name) for b in backends
        ]

    def clean_request_id(self) -> str:
        return clean_request_id(self.cleaned_data.get("request_id", ""))


# --- Members and settings ----------------------------------------------------


class MemberAddForm(forms.Form):
    email = forms.EmailField(label="Email of an existing user")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Membership.Role.DEVELOPER)


class InviteForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Membership.Role.DEVELOPER)


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


class OrganisationSettingsForm(forms.ModelForm):
    class Meta:
        model = Organisation
        fields = [
            "name",
            "retention_policy",
            "store_ttl_hours",
            "usage_retention_days",
            "default_rpm",
            "default_tpm",
            "default_concurrency",
        ]
        labels = {
            "retention_policy": "Stored responses",
            "store_ttl_hours": "Keep stored responses for (hours)",
            "usage_retention_days": "Keep usage rows for (days)",
            "default_rpm": "Default requests per minute",
            "default_tpm": "Default tokens per minute",
            "default_concurrency": "Default concurrent requests",
        }
        help_texts = {
            "retention_policy": "“Store nothing” is zero data retention: previous_response_id "
            "and GET /v1/responses/{id} are refused.",
            "default_rpm": "Applies to the whole organisation and to keys without their own limit.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _at_least_one(
            self,
            "store_ttl_hours",
            "usage_retention_days",
            "default_rpm",
            "default_tpm",
            "default_concurrency",
        )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("The organisation needs a name.")
        return name
