"""Where a file's content is kept: Django's storage API over a local folder
(the embedded default) or an S3-compatible bucket (``django-storages``).

The content is sealed before it leaves the process, with the organisation's
seal (``translate.sealing``, the key reasoning tokens use): in frames of at
most :data:`FRAME` bytes, each sealed on its own with the file's id, its
index and whether it is the last as associated data, so a frame moved to
another file or place, or a file cut short, does not open. A frame is its
sealed length (4 bytes, big-endian) and the sealed bytes.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Iterator
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage

from responses_api.runtime.secrets import seal_keys
from responses_api.translate.sealing import ReasoningSeal, SealBroken

FRAME = 1024 * 1024
_LENGTH = 4


class ContentBroken(Exception):
    """Stored content that does not open: altered, cut short or of another
    organisation or platform key."""


def files_storage() -> Storage:
    """The storage the settings name, built once per configuration."""
    if settings.SWITCHYARD_FILES_STORAGE == "s3":
        s3 = settings.SWITCHYARD_FILES_S3
        return _s3(
            s3["bucket"],
            s3["endpoint_url"],
            s3["region"],
            s3["access_key_id"],
            s3["secret_access_key"],
        )
    return _local(settings.SWITCHYARD_FILES_DIR)


@functools.lru_cache(maxsize=4)
def _local(location: str) -> Storage:
    return FileSystemStorage(location=location, file_permissions_mode=0o600)


@functools.lru_cache(maxsize=4)
def _s3(bucket: str, endpoint: str, region: str, key_id: str, secret: str) -> Storage:
    from storages.backends.s3 import S3Storage  # type: ignore[import-untyped]

    return S3Storage(
        bucket_name=bucket,
        endpoint_url=endpoint or None,
        region_name=region or None,
        access_key=key_id or None,
        secret_key=secret or None,
        default_acl=None,
        file_overwrite=False,
        querystring_auth=False,
    )


@functools.lru_cache(maxsize=1024)
def _seal(keys: tuple[bytes, ...], organisation_id: int) -> ReasoningSeal:
    return ReasoningSeal(keys, organisation_id)


def _context(file_id: str, index: int, last: bool) -> str:
    return f"file:{file_id}:{index}:{'last' if last else 'more'}"


def _frames(plain: IO[bytes], seal: ReasoningSeal, file_id: str) -> Iterator[bytes]:
    index = 0
    chunk = plain.read(FRAME)
    while True:
        following = plain.read(FRAME)
        sealed = seal.seal_bytes(chunk, _context(file_id, index, not following))
        yield len(sealed).to_bytes(_LENGTH, "big") + sealed
        if not following:
            return
        chunk, index = following, index + 1


def content_save(*, organisation_id: int, file_id: str, plain: IO[bytes]) -> str:
    """Seal ``plain`` (read from its start) and store it; the storage's name for it."""
    seal = _seal(seal_keys(), organisation_id)
    plain.seek(0)
    with tempfile.TemporaryFile() as sealed:
        for frame in _frames(plain, seal, file_id):
            sealed.write(frame)
        sealed.seek(0)
        return files_storage().save(f"{organisation_id}/{file_id}", File(sealed))


def content_frames(*, organisation_id: int, file_id: str, name: str) -> Iterator[bytes]:
    """The plain content stored under ``name``, one opened frame at a time,
    so that reading a file holds one frame (sealed and plain) whatever its
    size. A frame is yielded only once it has opened: whatever has been
    yielded is the file's true content, and :class:`ContentBroken` is raised
    at the first frame that does not open (altered, cut short, moved)."""
    seal = _seal(seal_keys(), organisation_id)
    with files_storage().open(name, "rb") as stored:
        header, index = _read(stored, _LENGTH), 0
        if not header:
            raise ContentBroken(f"file {file_id}: nothing stored")
        while header:
            size = int.from_bytes(header, "big")
            sealed = _read(stored, size)
            if len(header) < _LENGTH or size == 0 or len(sealed) < size:
                raise ContentBroken(f"file {file_id}: a frame is cut short")
            # The length of the next frame, or nothing: whether this one is the last.
            header = _read(stored, _LENGTH)
            try:
                plain = seal.open_bytes(sealed, _context(file_id, index, not header))
            except SealBroken as exc:
                raise ContentBroken(f"file {file_id}: {exc}") from None
            del sealed
            yield plain
            index += 1


def _read(stored: IO[bytes], size: int) -> bytes:
    # A storage's file may answer a read with fewer bytes than asked (an S3
    # body arrives in pieces): read until ``size`` or the end.
    parts, left = [], size
    while left > 0:
        part = stored.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def content_open(*, organisation_id: int, file_id: str, name: str) -> bytes:
    """The plain content stored under ``name``, whole (for what parses a
    file: inputs, ingestion); :class:`ContentBroken` when it does not open."""
    return b"".join(content_frames(organisation_id=organisation_id, file_id=file_id, name=name))


def content_delete(name: str) -> None:
    files_storage().delete(name)
