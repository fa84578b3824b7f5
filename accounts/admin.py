"""Django admin for superusers (SPEC §7). API keys are read-only here: a key
is created where its secret can be shown once (console or command line)."""

from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest

from accounts.models import ApiKey, AuditEntry, Invitation, Membership, Organisation

# The admin classes are generic only in django-stubs, not at run time.
if TYPE_CHECKING:
    MembershipInlineBase = admin.TabularInline[Membership, Organisation]
    OrganisationAdminBase = admin.ModelAdmin[Organisation]
    MembershipAdminBase = admin.ModelAdmin[Membership]
    ApiKeyAdminBase = admin.ModelAdmin[ApiKey]
    InvitationAdminBase = admin.ModelAdmin[Invitation]
    AuditEntryAdminBase = admin.ModelAdmin[AuditEntry]
else:
    MembershipInlineBase = admin.TabularInline
    OrganisationAdminBase = MembershipAdminBase = ApiKeyAdminBase = admin.ModelAdmin
    InvitationAdminBase = AuditEntryAdminBase = admin.ModelAdmin


class MembershipInline(MembershipInlineBase):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]
    readonly_fields = ["public_id", "created_at"]


@admin.register(Organisation)
class OrganisationAdmin(OrganisationAdminBase):
    list_display = ["slug", "name", "retention_policy", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(MembershipAdminBase):
    list_display = ["user", "organisation", "role", "created_at"]
    list_filter = ["role", "organisation"]
    search_fields = ["user__username", "user__email", "organisation__slug"]
    raw_id_fields = ["user"]
    readonly_fields = ["public_id"]


@admin.register(ApiKey)
class ApiKeyAdmin(ApiKeyAdminBase):
    list_display = ["name", "prefix", "organisation", "created_by", "last_used_at", "revoked_at"]
    list_filter = ["organisation"]
    search_fields = ["name", "prefix"]
    readonly_fields = ["id", "prefix", "key_hash", "created_at", "last_used_at", "created_by"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Invitation)
class InvitationAdmin(InvitationAdminBase):
    list_display = ["email", "organisation", "role", "invited_by", "created_at", "accepted_at"]
    list_filter = ["organisation", "role"]
    readonly_fields = ["id", "created_at", "accepted_at"]


@admin.register(AuditEntry)
class AuditEntryAdmin(AuditEntryAdminBase):
    list_display = ["created_at", "organisation", "actor_name", "source", "action", "target"]
    list_filter = ["organisation", "source", "action"]
    search_fields = ["actor_name", "action", "target"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEntry | None = None) -> bool:
        return False
