"""Files an organisation uploaded (the Files API, ``responses_api.files``).

The row holds only what the API shows of a file and where its content is;
the content itself is in the files storage, sealed with the organisation's
key (``files.storage``)."""

from django.db import models
from django.utils import timezone

from accounts.models import Organisation


class FileRecord(models.Model):
    class Purpose(models.TextChoices):
        USER_DATA = "user_data", "User data"
        ASSISTANTS = "assistants", "Assistants"

    id = models.CharField(primary_key=True, max_length=64)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="files", db_index=False
    )
    filename = models.CharField(max_length=255)
    purpose = models.CharField(max_length=32, choices=Purpose.choices)
    bytes = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=100, default="application/octet-stream")
    # The name of the sealed content in the files storage.
    storage_name = models.CharField(max_length=300)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organisation", "created_at"], name="file_org_time"),
            models.Index(fields=["expires_at"], name="file_expiry"),
        ]

    def __str__(self) -> str:
        return self.id
