"""Django admin for superusers. The upstream key of a backend is never shown
(it is stored encrypted; set it in the console or with ``add_backend``)."""

from django.contrib import admin

from responses_api.models import Backend, Deployment, ServedModel, UsageLog


class DeploymentInline(admin.TabularInline):
    model = Deployment
    extra = 0


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    list_display = ["name", "organisation", "base_url", "dialect", "enabled", "health"]
    list_filter = ["organisation", "dialect", "enabled", "health"]
    search_fields = ["name", "base_url"]
    exclude = ["api_key_encrypted"]
    readonly_fields = [
        "id",
        "health",
        "last_checked_at",
        "latency_ms",
        "version",
        "reported_models",
        "consecutive_failures",
        "last_error",
    ]


@admin.register(ServedModel)
class ServedModelAdmin(admin.ModelAdmin):
    list_display = ["public_id", "organisation", "context_window", "max_output_tokens"]
    list_filter = ["organisation"]
    search_fields = ["public_id"]
    inlines = [DeploymentInline]


@admin.register(UsageLog)
class UsageLogAdmin(admin.ModelAdmin):
    list_display = ["created_at", "request_id", "organisation", "model", "status", "backend_name"]
    list_filter = ["status", "stream", "organisation"]
    search_fields = ["=request_id", "key_prefix", "model"]
    date_hierarchy = "created_at"
    show_full_result_count = False

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
