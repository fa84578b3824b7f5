"""Django admin for superusers: a window onto the data, never a way to change
it. Every row here is written by the owning app's service functions, which
validate, record the audit entry and clear caches; an admin form would do none
of that, so each page links to the console page that edits the row instead.

Django's own ``User`` and ``Group`` admin (registered by ``django.contrib.auth``)
stay writable: the console manages memberships, not accounts, and granting
``is_staff``, superuser status or the support group, or deactivating an
account, has no other page."""

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from accounts.models import ApiKey, AuditEntry, Invitation, Membership, Organisation

# The admin classes are generic only in django-stubs, not at run time.
if TYPE_CHECKING:
    ModelAdminBase = admin.ModelAdmin[Any]
    TabularInlineBase = admin.TabularInline[Any, Any]
else:
    ModelAdminBase = admin.ModelAdmin
    TabularInlineBase = admin.TabularInline


class NoWrites:
    """Refuses adding, changing and deleting, so that a POST is a 403 and
    the pages show the rows as text."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(NoWrites, ModelAdminBase):
    """An admin page for a row the services own. ``console_view`` names the
    console page that edits it; ``console_kwargs`` gives that page's URL
    arguments for a row, when it takes any."""

    console_view = "console:dashboard"

    def console_kwargs(self, obj: Any) -> dict[str, object]:
        return {}

    @admin.display(description="Console")
    def console_link(self, obj: Model | None) -> str:
        if obj is None:
            return ""
        url = reverse(self.console_view, kwargs=self.console_kwargs(obj))
        return format_html('<a href="{}">Change in the console</a>', url)

    def get_list_display(self, request: HttpRequest) -> Any:
        return [*super().get_list_display(request), "console_link"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["console_link", *super().get_readonly_fields(request, obj)]


class ReadOnlyInline(NoWrites, TabularInlineBase):
    extra = 0


class MembershipInline(ReadOnlyInline):
    model = Membership


@admin.register(Organisation)
class OrganisationAdmin(ReadOnlyAdmin):
    # The console's settings page edits the organisation it is working in.
    console_view = "console:settings"
    list_display = ["slug", "name", "retention_policy", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    console_view = "console:members"
    list_display = ["user", "organisation", "role", "created_at"]
    list_filter = ["role", "organisation"]
    search_fields = ["user__username", "user__email", "organisation__slug"]


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyAdmin):
    console_view = "console:key_edit"
    list_display = ["name", "prefix", "organisation", "created_by", "last_used_at", "revoked_at"]
    list_filter = ["organisation"]
    search_fields = ["name", "prefix"]

    def console_kwargs(self, obj: ApiKey) -> dict[str, object]:
        return {"key_id": obj.id}


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    console_view = "console:members"
    list_display = ["email", "organisation", "role", "invited_by", "created_at", "accepted_at"]
    list_filter = ["organisation", "role"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    console_view = "console:audit"
    list_display = ["created_at", "organisation", "actor_name", "source", "action", "target"]
    list_filter = ["organisation", "source", "action"]
    search_fields = ["actor_name", "action", "target"]
