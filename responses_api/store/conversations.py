"""Conversations (docs/api/conversations.md): the one place that reads and writes them.

A conversation belongs to an organisation whose retention policy is
``store``. Its metadata and each of its items are sealed at rest
(``responses_api.runtime.secrets``); only ids and positions are plain. It
lives for ``store_ttl_hours`` after its last use — its creation, a change
of its metadata or items, or a response created in it — and its items go
with it.

Every read is scoped to the caller's organisation and filters on
``expires_at``, so another organisation's conversation, an expired one and
a deleted one are all :class:`Missing` alike. Functions here are
synchronous (the ORM); the request path calls them through
``sync_to_async``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from cryptography.fernet import InvalidToken
from django.db import transaction
from django.utils import timezone

from accounts.audit import CLI, Actor, audit_record
from accounts.models import Organisation
from responses_api.models import Conversation, ConversationItem
from responses_api.runtime.secrets import decrypt_bytes, encrypt_bytes
from responses_api.store.continuation import stored_input
from responses_api.store.responses import delete_in_batches
from responses_api.translate.items import new_id

log = logging.getLogger(__name__)

PURGE_BATCH = 500


class Missing(LookupError):
    """What was named is not there (or not the caller's): ``what`` is
    ``"conversation"`` or ``"item"``."""

    def __init__(self, what: str, identifier: str) -> None:
        super().__init__(f"{what} {identifier!r} not found")
        self.what = what
        self.identifier = identifier


class UnknownCursor(ValueError):
    """``after`` names no item of the conversation."""


@dataclass(frozen=True, slots=True)
class Page:
    items: list[dict[str, Any]]
    has_more: bool


def _seal(value: Any) -> str:
    return encrypt_bytes(orjson.dumps(value))


def _unseal(token: str, what: str) -> Any:
    try:
        return orjson.loads(decrypt_bytes(token))
    except InvalidToken:
        # Sealed under a key no longer configured: as good as gone.
        log.warning("a conversation's %s cannot be decrypted with the configured keys", what)
        return None


def _usable(identifier: str) -> bool:
    # Ids are minted without NUL, which PostgreSQL refuses in text: such an
    # id is not found, without a query.
    return "\x00" not in identifier


def _column(item_id: str) -> str:
    # PostgreSQL refuses NUL in text: such an id is kept (sealed, whole) but
    # can never be named, as :func:`_usable` says.
    return item_id.replace("\x00", "\ufffd")[:128]


def _live(organisation_id: int, now: datetime) -> Any:
    return Conversation.objects.filter(organisation_id=organisation_id, expires_at__gt=now)


def _object(row: Conversation, metadata: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "object": "conversation",
        "created_at": int(row.created_at.timestamp()),
        "metadata": metadata if isinstance(metadata, dict) else {},
    }


def _row(organisation_id: int, conversation_id: str, *, lock: bool = False) -> Conversation:
    if not _usable(conversation_id):
        raise Missing("conversation", conversation_id)
    rows = _live(organisation_id, timezone.now()).filter(id=conversation_id)
    row = (rows.select_for_update() if lock else rows).first()
    if row is None:
        raise Missing("conversation", conversation_id)
    return row


def _touch(row: Conversation, ttl_hours: int) -> None:
    row.expires_at = timezone.now() + timedelta(hours=ttl_hours)
    Conversation.objects.filter(pk=row.pk).update(expires_at=row.expires_at)


def _add(conversation_id: str, raw_items: list[Any]) -> list[dict[str, Any]]:
    """Store items as the API lists them: each with an id (the client's, or
    one minted) and messages with their content as parts."""
    items = stored_input(raw_items, {})
    ConversationItem.objects.bulk_create(
        ConversationItem(
            conversation_id=conversation_id, item_id=_column(str(item["id"])), data=_seal(item)
        )
        for item in items
    )
    return items


# --- conversations ------------------------------------------------------------------


def conversation_create(
    *,
    organisation_id: int,
    ttl_hours: int,
    metadata: dict[str, str] | None,
    items: list[Any],
) -> dict[str, Any]:
    now = timezone.now()
    row = Conversation(
        id=new_id("conv"),
        organisation_id=organisation_id,
        data=_seal(metadata or {}),
        created_at=now,
        expires_at=now + timedelta(hours=ttl_hours),
    )
    with transaction.atomic():
        row.save(force_insert=True)
        _add(row.id, items)
    return _object(row, metadata or {})


def conversation_get(*, organisation_id: int, conversation_id: str) -> dict[str, Any]:
    row = _row(organisation_id, conversation_id)
    return _object(row, _unseal(row.data, "metadata"))


def conversation_update(
    *, organisation_id: int, ttl_hours: int, conversation_id: str, metadata: dict[str, str]
) -> dict[str, Any]:
    """Replace the metadata, as OpenAI does (keys left out are dropped)."""
    with transaction.atomic():
        row = _row(organisation_id, conversation_id, lock=True)
        Conversation.objects.filter(pk=row.pk).update(data=_seal(metadata))
        _touch(row, ttl_hours)
    return _object(row, metadata)


def conversation_delete(*, organisation_id: int, conversation_id: str) -> None:
    with transaction.atomic():
        row = _row(organisation_id, conversation_id, lock=True)
        _delete_ids([row.pk])


def _delete_ids(ids: list[str]) -> None:
    # Items first, in bulk: the conversations then go without loading them.
    ConversationItem.objects.filter(conversation_id__in=ids).delete()
    Conversation.objects.filter(id__in=ids).delete()


# --- items ------------------------------------------------------------------------


def items_add(
    *, organisation_id: int, ttl_hours: int, conversation_id: str, items: list[Any]
) -> list[dict[str, Any]]:
    """Append ``items`` (as the client sent them) and return them as stored."""
    with transaction.atomic():
        row = _row(organisation_id, conversation_id, lock=True)
        _touch(row, ttl_hours)
        return _add(row.id, items)


def items_list(
    *,
    organisation_id: int,
    conversation_id: str,
    after: str | None,
    limit: int,
    order: str,
) -> Page:
    """One page of items, oldest first (``asc``) or newest first (``desc``),
    starting after the item ``after`` names."""
    row = _row(organisation_id, conversation_id)
    rows = ConversationItem.objects.filter(conversation_id=row.pk)
    rows = rows.order_by("id" if order == "asc" else "-id")
    if after:
        position = _position(row.pk, after)
        if position is None:
            raise UnknownCursor(after)
        rows = rows.filter(id__gt=position) if order == "asc" else rows.filter(id__lt=position)
    found = list(rows.values_list("data", flat=True)[: limit + 1])
    items = [_unseal(data, "item") for data in found[:limit]]
    return Page([item for item in items if item is not None], len(found) > limit)


def _position(conversation_pk: str, item_id: str) -> int | None:
    if not _usable(item_id):
        return None
    return (
        ConversationItem.objects.filter(conversation_id=conversation_pk, item_id=item_id)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def item_get(*, organisation_id: int, conversation_id: str, item_id: str) -> dict[str, Any]:
    row = _row(organisation_id, conversation_id)
    found = None
    if _usable(item_id):
        found = (
            ConversationItem.objects.filter(conversation_id=row.pk, item_id=item_id)
            .order_by("-id")
            .values_list("data", flat=True)
            .first()
        )
    item = _unseal(found, "item") if found is not None else None
    if item is None:
        raise Missing("item", item_id)
    return dict(item)


def item_delete(
    *, organisation_id: int, ttl_hours: int, conversation_id: str, item_id: str
) -> dict[str, Any]:
    """Delete an item; the answer is the conversation, as OpenAI's is."""
    with transaction.atomic():
        row = _row(organisation_id, conversation_id, lock=True)
        position = _position(row.pk, item_id)
        if position is None:
            raise Missing("item", item_id)
        ConversationItem.objects.filter(pk=position).delete()
        _touch(row, ttl_hours)
    return _object(row, _unseal(row.data, "metadata"))


# --- the request path ------------------------------------------------------------


def history(*, organisation_id: int, ttl_hours: int, conversation_id: str) -> list[dict[str, Any]]:
    """Every item of the conversation, oldest first, for a response created
    in it; the conversation is touched."""
    row = _row(organisation_id, conversation_id)
    _touch(row, ttl_hours)
    rows = ConversationItem.objects.filter(conversation_id=row.pk).order_by("id")
    items = (_unseal(data, "item") for data in rows.values_list("data", flat=True))
    return [item for item in items if item is not None]


# --- housekeeping -----------------------------------------------------------------


def conversations_purge(*, batch: int = PURGE_BATCH, now: datetime | None = None) -> int:
    """Delete every expired conversation with its items."""
    expired = Conversation.objects.filter(expires_at__lte=now or timezone.now())
    return delete_in_batches(
        expired.order_by("expires_at").values_list("id", flat=True), _delete_ids, batch
    )


def _delete_all(organisation_id: int, batch: int = PURGE_BATCH) -> int:
    owned = Conversation.objects.filter(organisation_id=organisation_id)
    return delete_in_batches(owned.values_list("id", flat=True), _delete_ids, batch)


def conversations_delete_all(*, organisation: Organisation, actor: Actor = CLI) -> int:
    """Delete every conversation of the organisation, with its items; audited."""
    deleted = _delete_all(organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="conversations.delete_all",
        target=organisation.name,
        details={"deleted": deleted},
    )
    return deleted


def conversations_forget_if_none(*, organisation_id: int) -> int:
    """After a settings change: an organisation that stores nothing keeps no
    conversation either."""
    policy = (
        Organisation.objects.filter(pk=organisation_id)
        .values_list("retention_policy", flat=True)
        .first()
    )
    if policy != Organisation.Retention.NONE:
        return 0
    return _delete_all(organisation_id)


def conversations_summary(*, organisation_id: int) -> tuple[int, int]:
    """How many live conversations the organisation holds, and their items."""
    live = _live(organisation_id, timezone.now())
    items = ConversationItem.objects.filter(conversation__in=live.values("id")).count()
    return live.count(), items
