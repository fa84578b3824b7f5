from django.contrib import admin

from accounts.admin import ReadOnlyAdmin
from console.forms.signin import AdminLoginForm
from console.models import BackendHealthCheck

# The admin's sign-in shares the console's throttle.
admin.site.login_form = AdminLoginForm


@admin.register(BackendHealthCheck)
class BackendHealthCheckAdmin(ReadOnlyAdmin):
    console_view = "console:backend"
    list_display = ["checked_at", "backend", "ok", "latency_ms", "source"]
    list_filter = ["ok", "source"]

    def console_kwargs(self, obj):
        return {"backend_id": obj.backend_id}
