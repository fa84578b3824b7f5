"""Writing an organisation's files: the one way a file is created, deleted
or purged, whoever asks (the API, the console, the purge task)."""

from __future__ import annotations

import logging
import mimetypes
import secrets
import time
from datetime import datetime, timedelta
from typing import IO

from django.db import transaction
from django.utils import timezone

from accounts.models import Organisation
from responses_api.files.selectors import file_get, file_quota, files_used_bytes
from responses_api.files.storage import content_delete, content_save, files_storage
from responses_api.files.upload import over_quota
from responses_api.models import FileRecord

log = logging.getLogger("switchyard.files")

PURGE_BATCH = 500
# Seconds before each further attempt at a content deletion that failed.
DROP_PAUSES = (0.2, 1.0)
ORPHAN_GRACE = timedelta(hours=1)


def new_file_id() -> str:
    return "file-" + secrets.token_hex(12)


def content_type_of(filename: str, declared: str) -> str:
    """What the content is served as: by its name's extension, else as the
    client declared it when that is a plain type, else as bytes."""
    guessed, _ = mimetypes.guess_type(filename, strict=False)
    if guessed:
        return guessed
    if declared and declared.count("/") == 1 and declared.isascii() and " " not in declared:
        return declared
    return "application/octet-stream"


def file_create(
    *,
    organisation_id: int,
    filename: str,
    purpose: str,
    content: IO[bytes],
    size: int,
    declared_type: str = "",
    expires_in: int | None = None,
) -> FileRecord:
    """Seal and store ``content`` (``size`` bytes), then record it, within
    the organisation's quota (checked again under the organisation's lock,
    as uploads of one organisation may race)."""
    file_id = new_file_id()
    name = content_save(organisation_id=organisation_id, file_id=file_id, plain=content)
    try:
        with transaction.atomic():
            organisation = Organisation.objects.select_for_update().get(pk=organisation_id)
            quota = file_quota(organisation)
            left = quota - files_used_bytes(organisation_id=organisation_id)
            if size > left:
                raise over_quota(left, quota)
            now = timezone.now()
            return FileRecord.objects.create(
                id=file_id,
                organisation_id=organisation_id,
                filename=filename,
                purpose=purpose,
                bytes=size,
                content_type=content_type_of(filename, declared_type),
                storage_name=name,
                created_at=now,
                expires_at=now + timedelta(seconds=expires_in) if expires_in else None,
            )
    except BaseException:
        content_delete(name)
        raise


def file_delete(*, organisation_id: int, file_id: str) -> bool:
    """Delete the organisation's file and its content; False when it has no such file."""
    # An expired file is gone already for its organisation; the purge removes it.
    record = file_get(organisation_id=organisation_id, file_id=file_id)
    if record is None:
        return False
    _remove(record)
    return True


def _remove(record: FileRecord) -> None:
    # The row goes; its content follows once that is committed
    # (``content_forget``, on every FileRecord deletion).
    FileRecord.objects.filter(id=record.id).delete()


def content_forget(*, file_id: str, name: str) -> None:
    """Delete a deleted file's content once its row's deletion is committed:
    however the row went (its own deletion, the purge, its organisation's
    cascade), and never before, so that a rolled-back deletion keeps its
    content. A storage that fails is tried again briefly, then logged: the
    deletion itself has happened, and :func:`files_orphans_purge` removes
    whatever content is left without a row."""
    transaction.on_commit(lambda: _content_drop(file_id, name))


def _content_drop(file_id: str, name: str) -> None:
    for pause in (*DROP_PAUSES, None):
        try:
            content_delete(name)
            return
        except Exception:
            if pause is None:
                log.exception("file %s: its content could not be deleted", file_id)
                return
            time.sleep(pause)


def files_orphans_purge(*, older_than: timedelta = ORPHAN_GRACE) -> int:
    """Delete stored content that no file row names, stored more than
    ``older_than`` ago (an upload stores its content just before its row);
    how many. The sweep behind :func:`content_forget`: content whose
    deletion failed, and content of rows deleted without their signal
    (a raw SQL delete)."""
    storage = files_storage()
    cutoff = timezone.now() - older_than
    dropped = 0
    try:
        folders, _ = storage.listdir("")
    except FileNotFoundError:  # a local folder nothing was stored in yet
        return 0
    for folder in folders:
        _, names = storage.listdir(folder)
        kept = set(
            FileRecord.objects.filter(storage_name__startswith=f"{folder}/").values_list(
                "storage_name", flat=True
            )
        )
        for name in names:
            stored = f"{folder}/{name}"
            if stored in kept or storage.get_modified_time(stored) > cutoff:
                continue
            try:
                content_delete(stored)
            except Exception:
                log.exception("stored content %s: could not be deleted", stored)
                continue
            dropped += 1
    return dropped


def files_purge(*, now: datetime | None = None, batch: int = PURGE_BATCH) -> int:
    """Delete every file past its ``expires_after``, content and row."""
    now = now or timezone.now()
    purged = 0
    while True:
        expired = list(
            FileRecord.objects.filter(expires_at__lte=now).only("id", "storage_name")[:batch]
        )
        for record in expired:
            _remove(record)
        purged += len(expired)
        if len(expired) < batch:
            return purged
