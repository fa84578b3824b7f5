"""The stored row of a background response, from queued to its end.

A background response is stored from the moment it is queued, so that
``GET /v1/responses/{id}`` answers from any web process (and after any
restart) with its status: the row is written with the ``queued`` response,
its ``response`` is replaced as it starts (``in_progress``), and the whole
row (with the ids of its output items) is written again as it ends,
whoever ends it: the worker, a cancel, or the reaper of a worker that
died. Reads stay those of ``store.responses`` (scoped to the organisation,
expiring with its TTL).

A write with a fencing token (``store.leases``) keeps it in the row and is
refused, in the transaction that holds the row, when the row holds a later
one: a worker that lost its lease cannot write over what the reaper wrote.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.db import transaction

from responses_api.models import StoredItem, StoredResponse
from responses_api.runtime.secrets import decrypt_bytes, encrypt_bytes
from responses_api.store import responses as store
from responses_api.store.continuation import Keep

# Where a row of ``store.response_entry`` holds its sealed data (its size follows).
DATA = 6
# The fencing token of the worker whose run this context is (None elsewhere).
FENCE: ContextVar[int | None] = ContextVar("background_fence", default=None)


def _locked(organisation_id: int, response_id: str, fence: int | None) -> Any:
    """The row, locked until the transaction ends, and its payload; None
    when it is gone, or holds a later token than ``fence``."""
    row = (
        StoredResponse.objects.select_for_update()
        .filter(organisation_id=organisation_id, id=response_id)
        .first()
    )
    if row is None:
        return None
    payload = orjson.loads(decrypt_bytes(row.data))
    if fence is not None and payload.get("fence", 0) > fence:
        return None
    return payload


def _sealed(row: tuple[Any, ...], **fields: Any) -> tuple[Any, ...]:
    payload = orjson.loads(decrypt_bytes(row[DATA]))
    payload.update(fields)
    data = encrypt_bytes(orjson.dumps(payload))
    return (*row[:DATA], data, len(data), *row[DATA + 2 :])


def background_replace(entry: store.Entry, fence: int | None = None) -> bool:
    """Write ``entry`` over the response's row; False (nothing written) when
    the row is gone meanwhile (deleted, expired and purged), or was written
    under a later token than ``fence``."""
    row, ids = entry
    response_id, organisation_id = row[0], row[1]
    with transaction.atomic():
        if _locked(organisation_id, response_id, fence) is None:
            return False
        StoredItem.objects.filter(response_id=response_id).delete()
        StoredResponse.objects.filter(id=response_id).delete()
        store.responses_insert([(_sealed(row, fence=fence or 0), ids)])
    return True


def background_update(
    *, organisation_id: int, response_id: str, response: dict[str, Any], fence: int | None = None
) -> bool:
    """Replace the response the row holds (its status as it runs), keeping
    its input items; False when the row is gone, or was written under a
    later token than ``fence``."""
    with transaction.atomic():
        payload = _locked(organisation_id, response_id, fence)
        if payload is None:
            return False
        payload["response"] = response
        if fence is not None:
            payload["fence"] = fence
        if response.get("status") not in ("queued", "in_progress"):
            payload.pop("job", None)  # ended: no row is owed any more
        data = encrypt_bytes(orjson.dumps(payload))
        StoredResponse.objects.filter(id=response_id).update(data=data, size=len(data))
    return True


@dataclass(slots=True)
class Replacing(Keep):
    """Keeps a background response as it ends: over its queued row."""

    async def save(self, response: dict[str, Any]) -> None:
        await sync_to_async(background_replace)(self.entry(response), FENCE.get())


async def background_insert(keep: Keep, response: dict[str, Any], job: bytes) -> None:
    """The queued row, written before the create request is answered, with
    the job sealed in it until the response ends: the create request's
    usage row can still be written when the job kept elsewhere is lost
    (the embedded default's memory, at a restart)."""
    row, ids = keep.entry(response)
    await sync_to_async(store.responses_insert)([(_sealed(row, job=job.decode()), ids)])


def background_job(*, organisation_id: int, response_id: str) -> bytes | None:
    """The job sealed in a background response's row while it runs (None
    once it ended, or when the row is gone)."""
    row = StoredResponse.objects.filter(organisation_id=organisation_id, id=response_id).first()
    if row is None:
        return None
    job = orjson.loads(decrypt_bytes(row.data)).get("job")
    return job.encode() if isinstance(job, str) else None
