"""Organisation settings, API keys, members, invitations, the audit log and
admin keys, as the management API shows and takes them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.models import AdminApiKey, ApiKey, AuditEntry, Membership, Organisation
from admin_api.serializers.base import (
    ObjectTypeField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictEmailField,
    StrictIntegerField,
    StrictSerializer,
)
from admin_api.serializers.spend import (
    BUDGET_HELP,
    TOKENS_HELP,
    BudgetWarningField,
    MonthlyBudgetField,
    MonthlyTokensField,
    SpendSerializer,
    month_spend,
    spend_body,
)
from responses_api.files.selectors import files_used_bytes
from responses_api.models import ServedModel


def _limit(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(min_value=1, allow_null=True, required=False, **kwargs)


class OrganisationSerializer(StrictSerializer):
    id = serializers.CharField(source="slug", read_only=True)
    object = ObjectTypeField("organisation")
    slug = serializers.CharField(read_only=True)
    name = StrictCharField(max_length=200, required=False)
    retention_policy = StrictChoiceField(choices=Organisation.Retention.choices, required=False)
    store_ttl_hours = StrictIntegerField(min_value=1, required=False)
    usage_retention_days = StrictIntegerField(min_value=1, required=False)
    default_rpm = _limit()
    default_tpm = _limit()
    default_concurrency = _limit()
    currency = StrictCharField(
        max_length=3, required=False, help_text="ISO 4217 code of the model prices and budgets."
    )
    monthly_budget = MonthlyBudgetField(help_text=BUDGET_HELP + " Counts all its keys' spend.")
    monthly_tokens = MonthlyTokensField(help_text=TOKENS_HELP + " Counts all its keys' tokens.")
    budget_warning_percent = BudgetWarningField()
    allow_client_mcp_servers = StrictBooleanField(
        required=False,
        help_text="Whether a request's mcp tool may name its own server_url; off, only the "
        "organisation's registered MCP servers are reached.",
    )
    file_quota_bytes = StrictIntegerField(
        min_value=1,
        max_value=2**62,
        allow_null=True,
        required=False,
        help_text="Bytes of uploaded files (the Files API) the organisation may keep in all; "
        "null: the platform's default (SWITCHYARD_FILES_QUOTA_BYTES).",
    )
    file_bytes_used = serializers.SerializerMethodField()
    spend = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField(read_only=True)

    @extend_schema_field(serializers.IntegerField())
    def get_file_bytes_used(self, organisation: Organisation) -> int:
        return files_used_bytes(organisation_id=organisation.pk)

    @extend_schema_field(SpendSerializer)
    def get_spend(self, organisation: Organisation) -> dict[str, Any]:
        return month_spend(organisation.pk)


class ApiKeySerializer(StrictSerializer):
    id = serializers.UUIDField(read_only=True)
    object = ObjectTypeField("api_key")
    name = StrictCharField(max_length=200)
    prefix = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=["active", "expired", "revoked"], read_only=True)
    allowed_models = serializers.ListField(
        child=StrictCharField(max_length=200), required=False, max_length=1000
    )
    rpm = _limit()
    tpm = _limit()
    concurrency = _limit()
    expires_at = serializers.DateTimeField(allow_null=True, required=False)
    monthly_budget = MonthlyBudgetField(
        help_text=BUDGET_HELP + " The organisation's own budget applies as well."
    )
    monthly_tokens = MonthlyTokensField(
        help_text=TOKENS_HELP + " The organisation's own quota applies as well."
    )
    spend = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField(read_only=True)
    created_by = serializers.CharField(
        source="created_by.username", read_only=True, allow_null=True
    )
    last_used_at = serializers.DateTimeField(read_only=True, allow_null=True)
    revoked_at = serializers.DateTimeField(read_only=True, allow_null=True)

    @extend_schema_field(SpendSerializer)
    def get_spend(self, key: ApiKey) -> dict[str, Any]:
        """A list reads every key's month in one query (``spend_by_key`` in
        the context); a single key reads its own."""
        by_key = self.context.get("spend_by_key")
        if by_key is None:
            return month_spend(key.organisation_id, str(key.pk))
        month, spent = by_key
        return spend_body(spent.get(str(key.pk), (Decimal(0), 0)), month)

    def validate_allowed_models(self, value: list[str]) -> list[str]:
        organisation = self.context["organisation"]
        known = set(
            ServedModel.objects.filter(organisation=organisation).values_list(
                "public_id", flat=True
            )
        )
        unknown = [name for name in value if name not in known]
        if unknown:
            raise serializers.ValidationError(
                f"No model “{unknown[0]}” in this organisation (use model ids, not aliases)."
            )
        return value


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(
        read_only=True, help_text="The full key: in this answer only, never shown again."
    )


class MemberSerializer(StrictSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    object = ObjectTypeField("member")
    username = serializers.CharField(source="user.username", read_only=True)
    email = serializers.CharField(source="user.email", read_only=True)
    role = StrictChoiceField(choices=Membership.Role.choices)
    created_at = serializers.DateTimeField(read_only=True)


class InvitationSerializer(StrictSerializer):
    id = serializers.UUIDField(read_only=True)
    object = ObjectTypeField("invitation")
    email = StrictEmailField(max_length=254)
    role = StrictChoiceField(choices=Membership.Role.choices, required=False)
    status = serializers.ChoiceField(
        choices=["pending", "accepted", "revoked", "expired"], read_only=True
    )
    invited_by = serializers.CharField(
        source="invited_by.username", read_only=True, allow_null=True
    )
    created_at = serializers.DateTimeField(read_only=True)
    expires_at = serializers.DateTimeField(read_only=True)


class InvitationCreatedSerializer(InvitationSerializer):
    url = serializers.CharField(
        read_only=True, help_text="The one-time link to send to the invited person."
    )


class AuditEntrySerializer(serializers.Serializer):
    id = serializers.CharField(read_only=True)
    object = ObjectTypeField("audit_entry")
    created_at = serializers.DateTimeField(read_only=True)
    actor = serializers.CharField(source="actor_name", read_only=True)
    admin_key_id = serializers.UUIDField(read_only=True, allow_null=True)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field, not Field.source
        choices=AuditEntry.Source.choices, read_only=True
    )
    action = serializers.CharField(read_only=True)
    target = serializers.CharField(read_only=True)
    details = serializers.DictField(read_only=True)


class AdminApiKeySerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    object = ObjectTypeField("admin_api_key")
    name = serializers.CharField(read_only=True)
    prefix = serializers.CharField(read_only=True)
    role = serializers.ChoiceField(choices=AdminApiKey.Role.choices, read_only=True)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=AdminApiKey.Scope.choices), read_only=True
    )
    organisation = serializers.CharField(source="organisation.slug", read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    expires_at = serializers.DateTimeField(read_only=True, allow_null=True)
    last_used_at = serializers.DateTimeField(read_only=True, allow_null=True)
