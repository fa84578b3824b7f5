"""Reading an upload (``multipart/form-data``) as it arrives.

The body is parsed chunk by chunk (``python-multipart``): the file's bytes
go to a temporary file (in memory while small) and are counted as they
come, so an upload past the per-file cap or the organisation's quota is
refused at the chunk that passes it, never buffered whole. The other
fields are small, and capped too.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import IO

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from responses_api.protocol.errors import ApiError, invalid

FIELD_BYTES = 1024
MEMORY_BYTES = 1024 * 1024
# Room for the parts' headers and boundaries around the file itself.
OVERHEAD = 64 * 1024
FIELDS = frozenset({"file", "purpose", "expires_after[anchor]", "expires_after[seconds]"})
# A refused upload's connection is closed: the rest of its body is not read.
CLOSE = [(b"connection", b"close")]
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]")


@dataclass(slots=True)
class Upload:
    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    content_type: str = ""
    size: int = 0
    # Closed by whoever reads the upload (``read_upload`` on a refusal).
    data: IO[bytes] = field(
        default_factory=lambda: tempfile.SpooledTemporaryFile(MEMORY_BYTES)  # noqa: SIM115
    )


def clean_filename(raw: str) -> str:
    """The name a client gave, without any folder and without control
    characters or separators; ``file`` when nothing is left."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("", name).strip().lstrip(".")
    return name[:255] or "file"


def too_large(cap: int) -> ApiError:
    return ApiError(
        413,
        f"The file is larger than the {cap} bytes one upload may hold.",
        param="file",
        code="file_too_large",
        headers=CLOSE,
    )


def over_quota(left: int, quota: int) -> ApiError:
    return ApiError(
        413,
        f"The file does not fit in this organisation's file quota of {quota} bytes "
        f"({max(left, 0)} bytes left). Delete files, or ask an administrator for a larger quota.",
        param="file",
        code="file_quota_exceeded",
        headers=CLOSE,
    )


def boundary_of(content_type: bytes | None) -> bytes:
    kind, options = parse_options_header(content_type or b"")
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise invalid(
            "Upload a file as multipart/form-data, with the fields file and purpose.",
            code="invalid_content_type",
        )
    return boundary


class _Reader:
    """The parser's callbacks: one part at a time, into an :class:`Upload`."""

    def __init__(self, upload: Upload, cap: int, left: int, quota: int) -> None:
        self.upload, self.cap, self.left, self.quota = upload, cap, left, quota
        self.header_name = b""
        self.header_value = b""
        self.headers: dict[bytes, bytes] = {}
        self.name = ""
        self.value = bytearray()
        self.is_file = False
        self.complete = False

    def on_end(self) -> None:
        self.complete = True

    def on_part_begin(self) -> None:
        self.headers, self.name, self.value, self.is_file = {}, "", bytearray(), False

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.headers[self.header_name.lower()] = self.header_value
        self.header_name, self.header_value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.headers.get(b"content-disposition", b""))
        self.name = options.get(b"name", b"").decode("utf-8", "replace")
        if self.name not in FIELDS:
            raise invalid(f"Unknown parameter: '{self.name[:100]}'.", param=self.name[:100])
        if self.name in self.upload.fields or (self.name == "file" and self.upload.filename):
            raise invalid(f"The field '{self.name}' is given twice.", param=self.name)
        self.is_file = self.name == "file"
        if self.is_file:
            filename = options.get(b"filename")
            if filename is None:
                raise invalid("The field 'file' must be a file, with a filename.", param="file")
            self.upload.filename = clean_filename(filename.decode("utf-8", "replace"))
            kind = self.headers.get(b"content-type", b"").decode("latin-1")
            self.upload.content_type = kind.split(";")[0].strip().lower()[:100]

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if not self.is_file:
            self.value += data[start:end]
            if len(self.value) > FIELD_BYTES:
                raise invalid(f"The field '{self.name}' is too long.", param=self.name)
            return
        upload = self.upload
        upload.size += end - start
        if upload.size > self.cap:
            raise too_large(self.cap)
        if upload.size > self.left:
            raise over_quota(self.left, self.quota)
        upload.data.write(data[start:end])

    def on_part_end(self) -> None:
        if not self.is_file:
            try:
                self.upload.fields[self.name] = self.value.decode("utf-8")
            except UnicodeDecodeError:
                raise invalid(f"The field '{self.name}' is not UTF-8.", param=self.name) from None


async def read_upload(
    chunks: AsyncIterator[bytes],
    content_type: bytes | None,
    *,
    cap: int,
    left: int,
    quota: int,
) -> Upload:
    """The fields and the file of a multipart body, the file no larger than
    ``cap`` nor ``left`` (the quota left, of ``quota``)."""
    boundary = boundary_of(content_type)
    upload = Upload()
    reader = _Reader(upload, cap, left, quota)
    parser = MultipartParser(boundary, callbacks=_callbacks(reader))  # type: ignore[arg-type]
    try:
        async for chunk in chunks:
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError as exc:
        upload.data.close()
        raise invalid(f"The multipart body is malformed: {str(exc)[:200]}.") from None
    except BaseException:
        upload.data.close()
        raise
    if not reader.complete:
        upload.data.close()
        raise invalid("The multipart body is malformed: it ends before its closing boundary.")
    if upload.filename is None:
        upload.data.close()
        raise invalid("Missing required parameter: 'file'.", param="file")
    upload.data.seek(0, os.SEEK_SET)
    return upload


def _callbacks(reader: _Reader) -> dict[str, object]:
    return {
        name: getattr(reader, name)
        for name in (
            "on_part_begin",
            "on_part_data",
            "on_part_end",
            "on_header_field",
            "on_header_value",
            "on_header_end",
            "on_headers_finished",
            "on_end",
        )
    }
