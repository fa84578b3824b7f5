"""Reading an organisation's files: every read is scoped to one organisation
and skips expired files, so another organisation's file, a deleted one and
an expired one are all simply not found."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q, Sum
from django.utils import timezone

from accounts.models import Organisation
from responses_api.files.storage import content_open
from responses_api.models import FileRecord


def _live(organisation_id: int, now: datetime | None = None) -> Any:
    now = now or timezone.now()
    return FileRecord.objects.filter(organisation_id=organisation_id).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


def _plausible(file_id: str) -> bool:
    # Ids are minted short and without NUL, which PostgreSQL refuses in text:
    # such an id names no file, and is not sent to the database.
    return "\x00" not in file_id and len(file_id) <= 64


def file_get(*, organisation_id: int, file_id: str) -> FileRecord | None:
    if not _plausible(file_id):
        return None
    return _live(organisation_id).filter(id=file_id).first()


def file_content_for(organisation_id: int, file_id: str) -> tuple[FileRecord, bytes]:
    """The file and its content, opened: for whatever reads a file for the
    organisation (``input_file`` items, vector store ingestion). Raises
    ``FileRecord.DoesNotExist`` for a file the organisation does not have."""
    record = file_get(organisation_id=organisation_id, file_id=file_id)
    if record is None:
        raise FileRecord.DoesNotExist(file_id)
    content = content_open(
        organisation_id=organisation_id, file_id=record.id, name=record.storage_name
    )
    return record, content


@dataclass(frozen=True, slots=True)
class FilesPage:
    files: list[FileRecord]
    has_more: bool


def files_page(
    *,
    organisation_id: int,
    purpose: str | None = None,
    order: str = "desc",
    after: str | None = None,
    limit: int = 10000,
) -> FilesPage | None:
    """One page of the organisation's files, by creation time; None when
    ``after`` names no file of the organisation."""
    files = _live(organisation_id)
    if purpose:
        files = files.filter(purpose=purpose)
    newest_first = order == "desc"
    if after:
        if not _plausible(after):
            return None
        anchor = files.filter(id=after).values_list("created_at", "id").first()
        if anchor is None:
            return None
        created, anchor_id = anchor
        if newest_first:
            files = files.filter(
                Q(created_at__lt=created) | Q(created_at=created, id__lt=anchor_id)
            )
        else:
            files = files.filter(
                Q(created_at__gt=created) | Q(created_at=created, id__gt=anchor_id)
            )
    ordering = ("-created_at", "-id") if newest_first else ("created_at", "id")
    found = list(files.order_by(*ordering)[: limit + 1])
    return FilesPage(found[:limit], len(found) > limit)


def files_used_bytes(*, organisation_id: int) -> int:
    """Bytes of files the organisation keeps, expired ones not yet purged included
    (they are still stored)."""
    total = FileRecord.objects.filter(organisation_id=organisation_id).aggregate(
        total=Sum("bytes")
    )["total"]
    return int(total or 0)


def file_quota(organisation: Organisation) -> int:
    quota = organisation.file_quota_bytes
    return settings.SWITCHYARD_FILES_QUOTA_BYTES if quota is None else quota


def file_object(record: FileRecord) -> dict[str, Any]:
    """The file as OpenAI's ``FileObject``."""
    return {
        "id": record.id,
        "object": "file",
        "bytes": record.bytes,
        "created_at": int(record.created_at.timestamp()),
        "expires_at": int(record.expires_at.timestamp()) if record.expires_at else None,
        "filename": record.filename,
        "purpose": record.purpose,
        "status": "processed",
        "status_details": None,
    }
