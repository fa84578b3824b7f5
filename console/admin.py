from django.contrib import admin

from console.forms import AdminLoginForm
from console.models import BackendHealthCheck

# The admin's sign-in shares the console's throttle.
admin.site.login_form = AdminLoginForm


@admin.register(BackendHealthCheck)
class BackendHealthCheckAdmin(admin.ModelAdmin):
    list_display = ["checked_at", "backend", "ok", "latency_ms", "source"]
    list_filter = ["ok", "source"]
