"""Django admin for superusers, read-only (see ``accounts.admin``). The
upstream key of a backend and an MCP server's headers and authorization are
never shown (they are stored encrypted; set them in the console, the
management API or with ``add_backend`` and ``apply``)."""

from django.contrib import admin

from accounts.admin import ReadOnlyAdmin, ReadOnlyInline
from responses_api.models import Backend, Deployment, McpServer, ServedModel, UsageLog


class DeploymentInline(ReadOnlyInline):
    model = Deployment


@admin.register(Backend)
class BackendAdmin(ReadOnlyAdmin):
    console_view = "console:backend_edit"
    list_display = ["name", "organisation", "base_url", "dialect", "enabled", "health"]
    list_filter = ["organisation", "dialect", "enabled", "health"]
    search_fields = ["name", "base_url"]
    exclude = ["api_key_encrypted"]

    def console_kwargs(self, obj):
        return {"backend_id": obj.id}


@admin.register(ServedModel)
class ServedModelAdmin(ReadOnlyAdmin):
    console_view = "console:model_edit"
    list_display = ["public_id", "organisation", "context_window", "max_output_tokens"]
    list_filter = ["organisation"]
    search_fields = ["public_id"]
    inlines = [DeploymentInline]

    def console_kwargs(self, obj):
        return {"model_id": obj.id}


@admin.register(McpServer)
class McpServerAdmin(ReadOnlyAdmin):
    console_view = "console:mcp_server_edit"
    list_display = ["label", "organisation", "server_url", "transport", "enabled"]
    list_filter = ["organisation", "enabled"]
    search_fields = ["label", "server_url"]
    exclude = ["headers_encrypted", "authorization_encrypted"]

    def console_kwargs(self, obj):
        return {"server_id": obj.id}


@admin.register(UsageLog)
class UsageLogAdmin(ReadOnlyAdmin):
    console_view = "console:trace"
    list_display = ["created_at", "request_id", "organisation", "model", "status", "backend_name"]
    list_filter = ["status", "stream", "organisation"]
    search_fields = ["=request_id", "key_prefix", "model"]
    date_hierarchy = "created_at"
    show_full_result_count = False

    def console_kwargs(self, obj):
        return {"request_id": obj.request_id}
