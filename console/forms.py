"""Console forms: they parse what a person typed into the values the services
take. The domain rules (names taken, ranges, who may do what) live in the
services, whose :class:`~django.core.exceptions.ValidationError` the views
put back on the form, field by field."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import password_validation
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.utils import timezone

from accounts.models import AdminApiKey, Membership, Organisation
from accounts.services.organisations import SETTINGS_FIELDS
from console.throttle import login_failure_record, login_lockout, login_success_record
from responses_api.catalogue.services.served_models import MODEL_FIELDS
from responses_api.models import REASONING_LEVELS, Backend, ServedModel


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


def set_choices(form: forms.BaseForm, name: str, choices: list[tuple[str, str]]) -> None:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    field.choices = choices


def _at_least_one(form: forms.BaseForm, *names: str) -> None:
    for name in names:
        field = form.fields[name]
        field.validators.append(MinValueValidator(1, "At least 1."))
        field.widget.attrs["min"] = 1


def errors_onto(form: forms.BaseForm, error: ValidationError) -> None:
    """A service's error on the form: on its field when the form has one."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for field, errors in error.error_dict.items():
        form.add_error(field if field in form.fields else None, errors)


class ServiceForm(forms.ModelForm):
    """Fields and initial values come from the model, but the form never
    touches the instance: the service validates, compares and writes."""

    def _post_clean(self) -> None:
        pass

    def save(self, commit: bool = True) -> Any:
        raise NotImplementedError("Call the service that owns this record.")


def _limit(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, min_value=1, help_text=help_text)


def _budget(help_text: str) -> forms.DecimalField:
    return forms.DecimalField(
        label="Monthly budget",
        required=False,
        min_value=Decimal("0.000001"),
        max_digits=16,
        decimal_places=6,
        help_text=help_text,
    )


def _tokens(help_text: str) -> forms.IntegerField:
    return forms.IntegerField(
        label="Monthly tokens", required=False, min_value=1, help_text=help_text
    )


SPEND_HELP = (
    "Per calendar month (UTC), in the currency of the model prices; once reached, "
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

    def __init__(self, *args, model_ids: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        set_choices(self, "allowed_models", [(m, m) for m in model_ids])


# --- Backends ----------------------------------------------------------------


class BackendForm(ServiceForm):
    upstream_key = forms.CharField(
        required=False,
        label="Upstream API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: it is stored encrypted and never shown again. "
        "Leave empty to keep the current one.",
    )
    # Not a URLField: its validator refuses single-label hosts (http://vllm:8000/v1).
    base_url = forms.CharField(
        label="Base URL",
        max_length=500,
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

    def __init__(self, *args, staff: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        _at_least_one(self, "max_concurrency")
        if staff:
            # Platform staff only: an organisation's admins never see it.
            self.fields["allow_private"] = forms.BooleanField(
                required=False,
                initial=bool(self.instance and self.instance.allow_private),
                label="Allow a private address",
                help_text="Platform staff: this backend may sit on a loopback, private or "
                "link-local address, which the platform otherwise refuses.",
            )

    def service_data(self) -> dict[str, Any]:
        """The fields as ``backend_create``/``backend_update`` take them."""
        data = {f: self.cleaned_data[f] for f in self.Meta.fields}
        if "allow_private" in self.fields:
            data["allow_private"] = self.cleaned_data["allow_private"]
        if self.cleaned_data["upstream_key"]:
            data["upstream_key"] = self.cleaned_data["upstream_key"]
        elif self.cleaned_data["clear_upstream_key"]:
            data["upstream_key"] = None
        return data


# --- Models ------------------------------------------------------------------


class ServedModelForm(ServiceForm):
    aliases = forms.CharField(
        required=False,
        help_text="Other names clients may use, separated by commas.",
    )
    reasoning_levels = forms.MultipleChoiceField(
        required=False,
        choices=[(level, level) for level in REASONING_LEVELS],
        widget=forms.CheckboxSelectMultiple,
        help_text="The reasoning efforts it takes; none ticked means low, medium and high.",
    )
    default_reasoning_effort = forms.ChoiceField(
        required=False,
        choices=[("", "medium, or its lowest level")]
        + [(level, level) for level in REASONING_LEVELS],
        help_text="What Codex sends unless told otherwise.",
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
            "supports_reasoning": "Reasoning",
            "supports_vision": "Accepts images",
            "first_token_timeout": "First-token timeout (s)",
        }
        help_texts = {
            "public_id": "What clients put in “model”, e.g. qwen3-32b.",
            "temperature": "Recommended; used when a request sets none.",
            "top_p": "Recommended; used when a request sets none.",
            "first_token_timeout": "How long a non-streamed request waits for the first token "
            "before it is answered 504; empty: the platform's default.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["aliases"] = ", ".join(self.instance.aliases or [])
            self.initial["reasoning_levels"] = list(self.instance.reasoning_levels or [])
        _at_least_one(self, "context_window", "max_output_tokens", "default_max_output_tokens")

    def clean_aliases(self) -> list[str]:
        raw = self.cleaned_data.get("aliases") or ""
        return [a.strip() for a in raw.split(",") if a.strip()]

    def service_data(self) -> dict[str, Any]:
        return {f: self.cleaned_data[f] for f in MODEL_FIELDS}


class DeploymentForm(forms.Form):
    backend = forms.ChoiceField(help_text="A backend that serves this model.")
    upstream_name = forms.CharField(
        max_length=200, help_text="The model's name on that backend, e.g. Qwen/Qwen3-32B."
    )

    def __init__(self, *args, backends, **kwargs):
        super().__init__(*args, **kwargs)
        self.backends = {str(b.id): b for b in backends}
        set_choices(self, "backend", [(str(b.id), b.name) for b in backends])

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
    session = forms.CharField(
        required=False,
        max_length=128,
        label="Session",
        widget=forms.TextInput(attrs={"placeholder": "session id"}),
    )

    def __init__(self, *args, models: list[str], keys, backends, **kwargs):
        super().__init__(*args, **kwargs)
        set_choices(self, "model", [("", "Any model")] + [(m, m) for m in models])
        set_choices(
            self,
            "key",
            [("", "Any key")] + [(str(k.id), f"{k.name} ({k.prefix}…)") for k in keys],
        )
        set_choices(
            self, "backend", [("", "Any backend")] + [(str(b.id), b.name) for b in backends]
        )

    def clean_request_id(self) -> str:
        return clean_request_id(self.cleaned_data.get("request_id", ""))


# --- Sign-in -----------------------------------------------------------------


class ThrottledLoginMixin:
    """Refuses sign-in while the account or the address is locked out
    (console/throttle.py), and counts each failure."""

    request: Any
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        ip = self.request.META.get("REMOTE_ADDR") if self.request is not None else None
        retry_at = login_lockout(username=username, ip=ip)
        if retry_at is not None:
            minutes = max(1, -(-int((retry_at - timezone.now()).total_seconds()) // 60))
            raise ValidationError(
                "Too many failed sign-in attempts. Try again after "
                f"{timezone.localtime(retry_at):%H:%M %Z} (in {minutes} min).",
                code="locked_out",
            )
        try:
            data = super().clean()  # type: ignore[misc]
        except ValidationError:
            login_failure_record(username=username, ip=ip)
            raise
        login_success_record(username=username)
        return data


class LoginForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class AdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass


# --- Members and settings ----------------------------------------------------


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
            "budget_warning_percent": "Warn past (% of a monthly limit)",
        }
        help_texts = {
            "monthly_budget": SPEND_HELP + " Counts every key of the organisation.",
            "monthly_tokens": TOKENS_HELP,
            "budget_warning_percent": "Past this share of a monthly limit (the organisation's "
            "or a key's), responses carry the notice budget_near_limit and the console a badge.",
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
            "monthly_tokens",
            "budget_warning_percent",
        )
        warning = self.fields["budget_warning_percent"]
        warning.widget.attrs["max"] = 100
        warning.required = False  # left empty: unchanged

    def service_data(self) -> dict[str, Any]:
        data = {f: self.cleaned_data[f] for f in self.Meta.fields}
        if data["budget_warning_percent"] is None:
            del data["budget_warning_percent"]
        return data
