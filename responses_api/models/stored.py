"""What the Responses API stores for an organisation that keeps it: stored
responses and their input items, and conversations and their items. The
content is encrypted at rest (``store``)."""

from django.db import models
from django.utils import timezone

from accounts.models import Organisation


class StoredResponse(models.Model):
    """A response kept under its organisation's ``store`` retention policy.

    ``data`` is the one encrypted token (``responses_api.runtime.secrets``) holding
    everything content-bearing: the response as the client got it, its
    input items and its instructions. The other columns say only how the
    row relates to others and when it goes: a chain is loaded in one query
    by ``root_id``, and every read filters on ``expires_at`` so an expired
    row is gone before the purge deletes it."""

    id = models.CharField(primary_key=True, max_length=64)
    # No index of its own on either table: the composite indexes lead with
    # it, and each index is another page written by every stored response.
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="stored_responses", db_index=False
    )
    previous_response_id = models.CharField(max_length=64, blank=True, default="")
    root_id = models.CharField(max_length=64)
    depth = models.PositiveIntegerField(default=0)
    # The routing affinity of the conversation (a hash), kept so that its
    # continuations go to the backend that holds its prefix.
    affinity = models.CharField(max_length=64, blank=True, default="")
    data = models.TextField()
    size = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organisation", "root_id"], name="stored_org_root"),
            models.Index(fields=["expires_at"], name="stored_expiry"),
        ]

    def __str__(self) -> str:
        return self.id


class StoredItem(models.Model):
    """Where an item id (``msg_…``, ``fc_…`` or the client's own) is found,
    for ``item_reference``; the item itself is in its response's ``data``.

    The response link does nothing on delete: the purge and the deletions
    remove items first, in bulk, so that deleting responses never loads
    their rows; an organisation's deletion takes both through its own link."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    response = models.ForeignKey(StoredResponse, on_delete=models.DO_NOTHING, related_name="items")
    item_id = models.CharField(max_length=128)

    class Meta:
        indexes = [models.Index(fields=["organisation", "item_id"], name="stored_item_id")]


class Conversation(models.Model):
    """A conversation (``conv_…``) of a ``store`` organisation: its metadata
    sealed in ``data``; it and its items go at ``expires_at``, the TTL after
    its last use."""

    id = models.CharField(primary_key=True, max_length=64)
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="+")
    data = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)


class ConversationItem(models.Model):
    """One sealed item of a conversation; the row id is its position."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="items", db_index=False
    )
    item_id = models.CharField(max_length=128)
    data = models.TextField()

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "id"], name="conv_item_order"),
            models.Index(fields=["conversation", "item_id"], name="conv_item_id"),
        ]
