"""Vector stores (``vs_…``), the files added to them and their chunks: what
``file_search`` and ``/v1/vector_stores`` read (``responses_api.retrieval``).

A chunk's text is encrypted at rest like every stored content; what the
keyword index holds instead is ``terms``, keyed hashes of its words
(docs/reference/retrieval.md, "Encryption")."""

from django.db import models
from django.utils import timezone

from accounts.models import Organisation


class VectorStore(models.Model):
    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", "In progress"
        COMPLETED = "completed", "Completed"
        EXPIRED = "expired", "Expired"

    id = models.CharField(primary_key=True, max_length=64)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    name = models.CharField(max_length=256, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    # OpenAI's {"anchor": "last_active_at", "days": N}, or None.
    expires_after = models.JSONField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_active_at = models.DateTimeField(default=timezone.now)
    usage_bytes = models.BigIntegerField(default=0)
    # The public id of the organisation's embedding model the store's chunks
    # and queries are embedded with, chosen at creation; "" when the
    # organisation had none: the store is then searched by keyword only.
    embedding_model = models.CharField(max_length=256, blank=True, default="")
    # Of the chunks' embeddings, fixed by the first file embedded.
    dimensions = models.PositiveIntegerField(null=True, blank=True)
    # Raised in the transaction of every write to the store's chunks: a
    # process's cached vector index older than this catches up first.
    index_version = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organisation", "-created_at"], name="vs_org_time")]

    def __str__(self) -> str:
        return self.id


class VectorStoreFile(models.Model):
    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", "In progress"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    store = models.ForeignKey(
        VectorStore, on_delete=models.CASCADE, related_name="files", db_index=False
    )
    # The Files API's id (``file-…``): a reference by value, so that this
    # table does not depend on how files are kept.
    file_id = models.CharField(max_length=64)
    filename = models.CharField(max_length=512, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    # {"code": "invalid_file" | "unsupported_file" | "server_error", "message"} or None.
    last_error = models.JSONField(null=True, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    chunking_strategy = models.JSONField(default=dict, blank=True)
    usage_bytes = models.BigIntegerField(default=0)
    # The file batch (``vsfb_…``) that added it last, if any.
    batch_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["store", "file_id"], name="vs_file_once"),
        ]
        indexes = [models.Index(fields=["store", "status"], name="vs_file_status")]

    def __str__(self) -> str:
        return f"{self.store_id}/{self.file_id}"


class VectorStoreFileBatch(models.Model):
    """Files added together (``/file_batches``); its counts and status are
    its files', except that a cancelled batch stays ``cancelled``."""

    id = models.CharField(primary_key=True, max_length=64)
    store = models.ForeignKey(
        VectorStore, on_delete=models.CASCADE, related_name="batches", db_index=True
    )
    cancelled = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.id


class Chunk(models.Model):
    """One chunk of a file: its text sealed, its terms for the keyword
    index (``terms``, full-text indexed per database by migration 0016) and
    its embedding as little-endian float32 bytes."""

    id = models.BigAutoField(primary_key=True)
    store = models.ForeignKey(
        VectorStore, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    file = models.ForeignKey(
        VectorStoreFile, on_delete=models.CASCADE, related_name="chunks", db_index=False
    )
    position = models.PositiveIntegerField()
    text = models.TextField()
    terms = models.TextField(blank=True, default="")
    embedding = models.BinaryField()
    tokens = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["store", "id"], name="chunk_store"),
            models.Index(fields=["file", "position"], name="chunk_file"),
        ]
