"""Backends and models (with their deployments), as the management API
shows and takes them."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from rest_framework import serializers

from admin_api.serializers.base import (
    ObjectTypeField,
    PlatformGuardedSerializer,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictDecimalField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
)
from responses_api.models import MODEL_KINDS, REASONING_LEVELS, Backend
from responses_api.protocol.body import TEMPERATURE_MAX, TOP_P_MAX


class BackendHealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(source="health", choices=Backend.Health.choices)
    last_checked_at = serializers.DateTimeField(allow_null=True)
    latency_ms = serializers.FloatField(allow_null=True)
    version = serializers.CharField()
    models = serializers.ListField(source="reported_models", child=serializers.CharField())
    last_error = serializers.CharField()


class BackendSerializer(PlatformGuardedSerializer):
    id = serializers.UUIDField(read_only=True)
    object = ObjectTypeField("backend")
    name = StrictCharField(max_length=100)
    base_url = StrictCharField(max_length=500)
    dialect = StrictChoiceField(choices=Backend.Dialect.choices, required=False)
    enabled = StrictBooleanField(required=False)
    max_concurrency = StrictIntegerField(
        min_value=0, required=False, help_text="Requests at once; 0 for no limit of Switchyard's."
    )
    extra_body = serializers.DictField(
        required=False, help_text="Merged into every chat request sent to this backend."
    )
    upstream_api_key = StrictCharField(
        write_only=True,
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=2000,
        help_text="Write-only, stored encrypted. null removes it; empty or absent keeps it.",
    )
    has_upstream_key = serializers.SerializerMethodField()
    allow_private = serializers.BooleanField(
        read_only=True,
        help_text="Platform staff let this backend sit on a private or link-local address: "
        "read-only here.",
    )
    kv_events_endpoint = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=300,
        help_text="Precise prefix scoring: the ZMQ address (tcp://HOST:PORT or ipc://PATH) "
        "vLLM publishes its KV-cache events on. Set by platform staff only.",
    )
    tokenizer_path = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="Precise prefix scoring: the local folder of the model's tokenizer.json and "
        "chat template. Set by platform staff only.",
    )
    shared = serializers.SerializerMethodField(
        help_text="A platform backend, shared by every organisation: read-only here."
    )
    health = BackendHealthSerializer(source="*", read_only=True)
    created_at = serializers.DateTimeField(read_only=True)

    def get_has_upstream_key(self, backend: Backend) -> bool:
        return bool(backend.api_key_encrypted)

    def get_shared(self, backend: Backend) -> bool:
        return backend.organisation_id is None


class BackendCheckSerializer(serializers.Serializer):
    object = ObjectTypeField("backend.check")
    ok = serializers.BooleanField()
    latency_ms = serializers.FloatField(allow_null=True)
    models = serializers.ListField(child=serializers.CharField())
    version = serializers.CharField()
    error = serializers.CharField()
    backend = BackendSerializer()


class DeploymentSerializer(StrictSerializer):
    backend = serializers.UUIDField(source="backend_id", help_text="A backend's id.")
    backend_name = serializers.CharField(source="backend.name", read_only=True)
    upstream_name = StrictCharField(max_length=200, help_text="The model's name on that backend.")

    def validate_backend(self, value: Any) -> Any:
        organisation = self.context["organisation"]
        backend = (
            Backend.objects.filter(Q(organisation=organisation) | Q(organisation__isnull=True))
            .filter(id=value)
            .first()
        )
        if backend is None:
            raise serializers.ValidationError("No backend with this id in this organisation.")
        return backend


def _count(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(min_value=1, allow_null=True, required=False, **kwargs)


class ModelSerializer(StrictSerializer):
    id = serializers.UUIDField(read_only=True)
    object = ObjectTypeField("model")
    public_id = StrictCharField(max_length=200, help_text="What clients send as `model`.")
    aliases = serializers.ListField(
        child=StrictCharField(max_length=200), required=False, max_length=100
    )
    deployments = DeploymentSerializer(
        many=True,
        required=False,
        help_text="Which backends serve it; on PATCH the list replaces the current one.",
    )
    context_window = _count()
    max_output_tokens = _count()
    default_max_output_tokens = _count()
    temperature = StrictFloatField(
        min_value=0, max_value=TEMPERATURE_MAX, allow_null=True, required=False
    )
    top_p = StrictFloatField(min_value=0, max_value=TOP_P_MAX, allow_null=True, required=False)
    supports_reasoning = StrictBooleanField(required=False)
    reasoning_levels = serializers.ListField(
        child=StrictChoiceField(choices=REASONING_LEVELS), required=False
    )
    default_reasoning_effort = StrictChoiceField(
        choices=["", *REASONING_LEVELS], required=False, allow_blank=True
    )
    supports_vision = StrictBooleanField(required=False)
    kind = StrictChoiceField(
        choices=[kind for kind, _ in MODEL_KINDS],
        required=False,
        help_text="`generate` (served by /v1/responses, the default) or `embed` "
        "(served by /v1/embeddings).",
    )
    first_token_timeout = StrictIntegerField(
        min_value=1,
        max_value=86_400,
        allow_null=True,
        required=False,
        help_text="Seconds a non-streamed request waits for the first token before a 504; "
        "null: the platform's default (SWITCHYARD_FIRST_TOKEN_TIMEOUT, 120).",
    )
    price_input = StrictDecimalField(required=False, help_text="Per million input tokens.")
    price_cached_input = StrictDecimalField(required=False)
    price_output = StrictDecimalField(required=False)
    created_at = serializers.DateTimeField(read_only=True)

    def validate_deployments(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen: set[Any] = set()
        for index, deployment in enumerate(value):
            backend = deployment["backend_id"]
            if backend.pk in seen:
                errors: list[dict[str, Any]] = [{} for _ in value]
                errors[index] = {"backend": ["The same backend twice."]}
                raise serializers.ValidationError(errors)
            seen.add(backend.pk)
        return value
