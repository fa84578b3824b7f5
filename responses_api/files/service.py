"""Writing an organisation's files: the one way a file is created, deleted
or purged, whoever asks (the API, the console, the purge task)."""

from __future__ import annotations

import logging
import mimetypes
import secrets
from datetime import datetime, timedelta
from typing import IO

from django.db import transaction
from django.utils import timezone

from accounts.models import Organisation
from responses_api.files.selectors import file_get, file_quota, files_used_bytes
from responses_api.files.storage import content_delete, content_save
from responses_api.files.upload import over_quota
from responses_api.models import FileRecord

log = logging.getLogger("switchyard.files")

PURGE_BATCH = 500


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
    # The row goes first: content without a row is never served, a row
    # without content would be.
    FileRecord.objects.filter(id=record.id).delete()
    try:
        content_delete(record.storage_name)
    except Exception:
        log.exception("file %s: its content could not be deleted", record.id)


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
