from django.contrib import admin

from console.models import BackendHealthCheck


@admin.register(BackendHealthCheck)
class BackendHealthCheckAdmin(admin.ModelAdmin):
    list_display = ["checked_at", "backend", "ok", "latency_ms", "source"]
    list_filter = ["ok", "source"]
