"""The forms of the catalogue's pages: backends, models and which backends
serve each model."""

from __future__ import annotations

from typing import Any

from django import forms

from console.forms.common import ServiceForm, at_least_one, set_choices
from responses_api.catalogue.services.served_models import MODEL_FIELDS
from responses_api.models import MODEL_KINDS, REASONING_LEVELS, Backend, ServedModel


def _private_help() -> str:
    """What the flag adds to the platform's own policy (docs/admin/backends.md)."""
    from django.conf import settings

    if settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE:
        return (
            "Platform staff: loopback, private and CGNAT addresses are already allowed on "
            "this platform (SWITCHYARD_BACKEND_ALLOW_PRIVATE); the flag also opens link-local "
            "and cloud metadata addresses, and keeps the others open if the setting is turned off."
        )
    return (
        "Platform staff: this backend may sit on a loopback, private, CGNAT, link-local or "
        "cloud metadata address, which the platform otherwise refuses."
    )


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
        at_least_one(self, "max_concurrency")
        if self.instance._state.adding:
            # A new backend has no stored key to keep or remove.
            del self.fields["clear_upstream_key"]
            self.fields[
                "upstream_key"
            ].help_text = "Optional. Write-only: it is stored encrypted and never shown again."
        if staff:
            # Platform staff only: an organisation's admins never see it.
            self.fields["allow_private"] = forms.BooleanField(
                required=False,
                initial=bool(self.instance and self.instance.allow_private),
                label="Allow a private address",
                help_text=_private_help(),
            )
            self.fields["kv_events_endpoint"] = forms.CharField(
                required=False,
                max_length=300,
                initial=self.instance.kv_events_endpoint if self.instance else "",
                label="KV-cache events address",
                help_text="Platform staff: precise prefix scoring of a vLLM backend, the ZMQ "
                "address it publishes its KV-cache events on (tcp://HOST:PORT or ipc://PATH).",
            )
            self.fields["tokenizer_path"] = forms.CharField(
                required=False,
                max_length=500,
                initial=self.instance.tokenizer_path if self.instance else "",
                label="Tokenizer folder",
                help_text="Platform staff: the local folder of the model's tokenizer.json and "
                "chat template (precise prefix scoring).",
            )

    def service_data(self) -> dict[str, Any]:
        """The fields as ``backend_create``/``backend_update`` take them."""
        data = {f: self.cleaned_data[f] for f in self.Meta.fields}
        for staff_field in ("allow_private", "kv_events_endpoint", "tokenizer_path"):
            if staff_field in self.fields:
                data[staff_field] = self.cleaned_data[staff_field]
        if self.cleaned_data["upstream_key"]:
            data["upstream_key"] = self.cleaned_data["upstream_key"]
        elif self.cleaned_data.get("clear_upstream_key"):
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

    kind = forms.ChoiceField(
        required=False,
        choices=MODEL_KINDS,
        help_text="Generation models answer /v1/responses; embedding models /v1/embeddings.",
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
            "kind": "Kind",
            "first_token_timeout": "First-token timeout (s)",
        }
        help_texts = {
            "public_id": "What clients put in “model”, e.g. qwen3-32b.",
            "temperature": "Recommended; used when a request sets none.",
            "top_p": "Recommended; used when a request sets none.",
            "first_token_timeout": "How long a non-streamed request waits for the first token "
            "before it is answered 504; empty: the platform's default.",
        }

    def __init__(self, *args, currency: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("price_input", "price_cached_input", "price_output") if currency else ():
            self.fields[name].label = f"{self.fields[name].label} ({currency})"
        if self.instance.pk:
            self.initial["aliases"] = ", ".join(self.instance.aliases or [])
            self.initial["reasoning_levels"] = list(self.instance.reasoning_levels or [])
        at_least_one(self, "context_window", "max_output_tokens", "default_max_output_tokens")

    def clean_kind(self) -> str:
        # A form sent without the field keeps the model's kind (a new one generates).
        return self.cleaned_data.get("kind") or self.instance.kind or "generate"

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
