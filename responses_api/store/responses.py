"""Stored responses (docs/api/stored-responses.md): the one place that reads and writes them.

An organisation whose retention policy is ``store`` keeps each response
created with ``store`` true, encrypted at rest (``responses_api.runtime.secrets``),
for ``store_ttl_hours`` after its last use. A *use* is its creation, a
request continuing a chain through it (``previous_response_id``: the whole
chain is touched, so a response's ancestors never expire before it) or an
``item_reference`` to one of its items.

Every read is scoped to the caller's organisation and filters on
``expires_at``: an expired response is gone for every endpoint at once,
before :func:`responses_purge` deletes it. Deleting a response also ends the
chains that run through it: continuing them would send what was deleted.

Functions here are synchronous (the ORM); the request path calls them
through ``sync_to_async``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from cryptography.fernet import InvalidToken
from django.db import connections, transaction
from django.db.models import Count, QuerySet, Sum
from django.utils import timezone

from accounts.audit import CLI, Actor, audit_record
from accounts.models import Organisation
from responses_api.models import StoredItem, StoredResponse
from responses_api.runtime.secrets import decrypt_bytes, encrypt_bytes
from responses_api.store.sql import Entry, postgres_params, row_values, sqlite_write, statements

log = logging.getLogger(__name__)

PURGE_BATCH = 500


@dataclass(frozen=True, slots=True)
class Stored:
    """One stored response, decrypted."""

    id: str
    previous_response_id: str
    root_id: str
    depth: int
    affinity: str
    response: dict[str, Any]
    input: list[dict[str, Any]]
    instructions: str | None

    def items(self) -> list[dict[str, Any]]:
        """What the response adds to its conversation: its input, then its output."""
        return [*self.input, *self.response.get("output", ())]


def _open(row: StoredResponse) -> Stored | None:
    try:
        payload = orjson.loads(decrypt_bytes(row.data))
    except InvalidToken:
        # Encrypted under a key no longer configured: as good as gone.
        log.warning("stored response %s cannot be decrypted with the configured keys", row.id)
        return None
    return Stored(
        id=row.id,
        previous_response_id=row.previous_response_id,
        root_id=row.root_id,
        depth=row.depth,
        affinity=row.affinity,
        response=payload["response"],
        input=payload["input"],
        instructions=payload.get("instructions"),
    )


def _storable(identifier: str) -> bool:
    """Whether ``identifier`` could name a stored response or item. Ids are
    minted without NUL, and PostgreSQL refuses NUL in any text parameter:
    an id with one is not found, as any unknown id, without a query."""
    return "\x00" not in identifier


def _live(organisation_id: int, now: datetime) -> Any:
    return StoredResponse.objects.filter(organisation_id=organisation_id, expires_at__gt=now)


# --- the request path ----------------------------------------------------------


def response_entry(
    *,
    organisation_id: int,
    ttl_hours: int,
    response: dict[str, Any],
    input_items: list[dict[str, Any]],
    instructions: str | None,
    previous: Stored | None,
    affinity: str,
) -> Entry:
    """The row that keeps ``response`` (as the client got it) with its input
    items, which each carry an id by now, and the rows of its item ids."""
    data = encrypt_bytes(
        orjson.dumps({"response": response, "input": input_items, "instructions": instructions})
    )
    now = timezone.now()
    response_id = response["id"]
    ids = {item["id"] for item in input_items if isinstance(item.get("id"), str)}
    ids.update(item["id"] for item in response.get("output", ()) if isinstance(item.get("id"), str))
    row = (
        response_id,
        organisation_id,
        previous.id if previous is not None else "",
        previous.root_id if previous is not None else response_id,
        previous.depth + 1 if previous is not None else 0,
        affinity,
        data,
        len(data),
        now,
        now + timedelta(hours=ttl_hours),
    )
    return row, [(organisation_id, response_id, item_id[:128]) for item_id in ids]


def responses_insert(entries: Sequence[Entry]) -> None:
    """Write ``entries`` in one transaction (one commit for the responses that
    ended together), once per connection vendor: the ORM's ``save`` and
    ``bulk_create`` cost several times the database's own work here, on the
    path of every stored response. On PostgreSQL one statement inserts a
    response and its item ids; elsewhere two."""
    connection = connections[StoredResponse.objects.db]
    sql = statements(connection)
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        # The DB-API connection itself, with ``?`` placeholders: Django's
        # SQLite cursor rewrites ``%s`` with a regular expression on every
        # statement, a third of this write's instructions.
        connection.ensure_connection()
        raw = connection.connection
        raw.execute("BEGIN IMMEDIATE")
        sqlite_write(raw, connection, entries)
        return
    if connection.vendor == "postgresql" and len(entries) == 1:
        with connection.cursor() as cursor:  # one statement: atomic by itself
            cursor.execute(sql[2], postgres_params(connection, entries[0]))
        return
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        for entry in entries:
            if connection.vendor == "postgresql":
                cursor.execute(sql[2], postgres_params(connection, entry))
                continue
            row, items = entry
            cursor.execute(sql[0], row_values(connection, row))
            if items:
                cursor.executemany(sql[1], items)


def response_save(**kwargs: Any) -> None:
    """Keep one response (see :func:`response_entry`)."""
    responses_insert([response_entry(**kwargs)])


@dataclass(frozen=True, slots=True)
class Lookup:
    """What a request refers to: the chain ending at its
    ``previous_response_id`` (oldest first; None when not found), and the
    items its ``item_reference`` items name that were found."""

    chain: list[Stored] | None
    items: dict[str, dict[str, Any]]


def lookup(
    *,
    organisation_id: int,
    ttl_hours: int,
    previous_response_id: str | None,
    item_ids: Sequence[str],
) -> Lookup:
    """Load what a new request continues from and refers to, and touch it:
    one call (one thread hop) for both."""
    now = timezone.now()
    chain = None
    if previous_response_id is not None and _storable(previous_response_id):
        chain = _chain(organisation_id, previous_response_id, now)
    item_ids = [i for i in item_ids if _storable(i)]
    items, holders = _items(organisation_id, item_ids, now) if item_ids else ({}, set())
    touched = {s.id for s in chain or ()} | holders
    if touched:
        StoredResponse.objects.filter(organisation_id=organisation_id, id__in=touched).update(
            expires_at=now + timedelta(hours=ttl_hours)
        )
    return Lookup(chain, items)


def _chain(organisation_id: int, response_id: str, now: datetime) -> list[Stored] | None:
    head = _live(organisation_id, now).filter(id=response_id).values_list("root_id", "depth")
    found = head.first()
    if found is None:
        return None
    root_id, depth = found
    rows = {
        row.id: row for row in _live(organisation_id, now).filter(root_id=root_id, depth__lte=depth)
    }
    path: list[StoredResponse] = []
    current = response_id
    while current:
        row = rows.get(current)
        if row is None or len(path) == len(rows):
            # A response of the chain was deleted or has expired, or (rows
            # damaged by hand) the chain loops: no row can come twice.
            return None
        path.append(row)
        current = row.previous_response_id
    chain = [_open(row) for row in reversed(path)]
    if any(stored is None for stored in chain):
        return None
    return [stored for stored in chain if stored is not None]


def _items(
    organisation_id: int, item_ids: Iterable[str], now: datetime
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The items named, each from the newest live response holding it, and
    the ids of those responses."""
    wanted = set(item_ids)
    holders: dict[str, str] = {}
    rows = (
        StoredItem.objects.filter(
            organisation_id=organisation_id,
            item_id__in=wanted,
            response__expires_at__gt=now,
        )
        .order_by("-response__created_at")
        .values_list("item_id", "response_id")
    )
    for item_id, response_id in rows:
        holders.setdefault(item_id, response_id)
    found: dict[str, dict[str, Any]] = {}
    responses = _live(organisation_id, now).filter(id__in=set(holders.values()))
    for row in responses:
        stored = _open(row)
        if stored is None:
            continue
        for item in stored.items():
            named = item.get("id")
            if isinstance(named, str) and holders.get(named) == row.id:
                found.setdefault(named, item)
    return found, {holders[i] for i in found}


# --- the API's other endpoints ----------------------------------------------------


def response_get(*, organisation_id: int, response_id: str) -> Stored | None:
    if not _storable(response_id):
        return None
    row = _live(organisation_id, timezone.now()).filter(id=response_id).first()
    return _open(row) if row is not None else None


def response_delete(*, organisation_id: int, response_id: str) -> bool:
    if not _storable(response_id):
        return False
    with transaction.atomic():
        if not _live(organisation_id, timezone.now()).filter(id=response_id).exists():
            return False
        _delete_ids([response_id])
    return True


def _delete_ids(ids: list[str]) -> None:
    # Items first: the response rows then go without being loaded.
    StoredItem.objects.filter(response_id__in=ids).delete()
    StoredResponse.objects.filter(id__in=ids).delete()


# --- housekeeping -----------------------------------------------------------------


def responses_purge(*, batch: int = PURGE_BATCH, now: datetime | None = None) -> int:
    """Delete every expired response."""
    expired = StoredResponse.objects.filter(expires_at__lte=now or timezone.now())
    return delete_in_batches(
        expired.order_by("expires_at").values_list("id", flat=True), _delete_ids, batch
    )


def delete_in_batches(
    ids: QuerySet[Any, Any], delete: Callable[[list[Any]], object], batch: int = PURGE_BATCH
) -> int:
    """Delete the rows whose ``ids`` the query lists with ``delete``, ``batch``
    at a time, each batch its own short transaction, so that no lock is held
    for long; how many there were."""
    deleted = 0
    while True:
        chunk = list(ids[:batch])
        if not chunk:
            return deleted
        with transaction.atomic():
            delete(chunk)
        deleted += len(chunk)
        if len(chunk) < batch:
            return deleted


def _delete_all(organisation_id: int, batch: int = PURGE_BATCH) -> int:
    owned = StoredResponse.objects.filter(organisation_id=organisation_id)
    return delete_in_batches(owned.values_list("id", flat=True), _delete_ids, batch)


def responses_delete_all(*, organisation: Organisation, actor: Actor = CLI) -> int:
    """Delete every response the organisation has stored; audited."""
    deleted = _delete_all(organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="stored_responses.delete_all",
        target=organisation.name,
        details={"deleted": deleted},
    )
    return deleted


def responses_forget_if_none(*, organisation_id: int) -> int:
    """After a settings change: an organisation that stores nothing keeps
    nothing (its retention policy was turned to ``none``)."""
    policy = (
        Organisation.objects.filter(pk=organisation_id)
        .values_list("retention_policy", flat=True)
        .first()
    )
    if policy != Organisation.Retention.NONE:
        return 0
    return _delete_all(organisation_id)


def responses_summary(*, organisation_id: int) -> tuple[int, int]:
    """How many responses the organisation holds, and their size in bytes."""
    totals = _live(organisation_id, timezone.now()).aggregate(count=Count("id"), size=Sum("size"))
    return totals["count"] or 0, totals["size"] or 0
