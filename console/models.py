"""Console-only records: the history of backend health checks."""

import uuid

from django.db import models
from django.utils import timezone

from responses_api.models import Backend


class BackendHealthCheck(models.Model):
    """One check of a backend: by the periodic task or "test connection"."""

    class Source(models.TextChoices):
        SCHEDULE = "schedule", "Scheduled"
        CONSOLE = "console", "Test connection"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="health_checks")
    checked_at = models.DateTimeField(default=timezone.now)
    ok = models.BooleanField()
    latency_ms = models.FloatField(null=True, blank=True)
    version = models.CharField(max_length=200, blank=True, default="")
    reported_models = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.SCHEDULE)

    class Meta:
        ordering = ["-checked_at"]
        indexes = [models.Index(fields=["backend", "-checked_at"], name="healthcheck_backend_time")]

    def __str__(self) -> str:
        return f"{self.backend} {'ok' if self.ok else 'failed'} at {self.checked_at:%H:%M:%S}"
