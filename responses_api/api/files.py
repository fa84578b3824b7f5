"""The Files API (``/v1/files``, docs/api/files.md), as OpenAI's: upload,
list, retrieve, download and delete an organisation's files.

Another organisation's file answers exactly as a missing one, and so does
an expired one. An upload is read as it arrives (``Call.upload``), under
the per-file cap and what is left of the organisation's quota.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.conf import settings

from accounts.models import Organisation
from responses_api.files import selectors, service
from responses_api.files.storage import content_frames
from responses_api.files.upload import OVERHEAD, Upload, read_upload, too_large
from responses_api.pipeline.call import Call, Reply
from responses_api.protocol.errors import ApiError, invalid

PURPOSES = ("user_data", "assistants")
EXPIRES_MIN, EXPIRES_MAX = 3600, 30 * 24 * 3600
LIST_MAX = 10000
# Set by the web server on an upload it stopped reading past the cap.
REFUSED = b"x-switchyard-body-refused"


def _organisation_id(call: Call) -> int:
    caller = call.exchange.caller
    assert caller is not None
    return caller.organisation_id


def file_not_found(file_id: str) -> ApiError:
    # The same for a file that is unknown, expired, deleted or another
    # organisation's: nothing in the answer tells them apart.
    return ApiError(
        404, f"No such File object: {file_id[:100]}", param="file_id", code="file_not_found"
    )


def _quota_left(organisation_id: int) -> tuple[int, int]:
    organisation = Organisation.objects.get(pk=organisation_id)
    quota = selectors.file_quota(organisation)
    return quota - selectors.files_used_bytes(organisation_id=organisation_id), quota


def _expiry(fields: dict[str, str]) -> int | None:
    anchor = fields.get("expires_after[anchor]")
    seconds = fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise invalid("expires_after[anchor] must be 'created_at'.", param="expires_after[anchor]")
    digits = seconds is not None and seconds.isascii() and seconds.isdigit() and len(seconds) < 9
    if not digits or not EXPIRES_MIN <= int(seconds or 0) <= EXPIRES_MAX:
        raise invalid(
            f"expires_after[seconds] must be an integer from {EXPIRES_MIN} to {EXPIRES_MAX}.",
            param="expires_after[seconds]",
        )
    return int(seconds or 0)


def _checked(upload: Upload) -> tuple[str, int | None]:
    purpose = upload.fields.get("purpose")
    if purpose is None:
        raise invalid("Missing required parameter: 'purpose'.", param="purpose")
    if purpose not in PURPOSES:
        raise invalid(
            f"Invalid value for purpose: '{purpose[:50]}'. Supported values: "
            + ", ".join(f"'{p}'" for p in PURPOSES)
            + ".",
            param="purpose",
        )
    if upload.size == 0:
        raise invalid("The file is empty.", param="file", code="empty_file")
    return purpose, _expiry(upload.fields)


async def create_file(call: Call) -> Reply:
    organisation_id = _organisation_id(call)
    assert call.upload is not None
    cap = settings.SWITCHYARD_FILES_MAX_BYTES
    encoding = call.headers.get(b"content-encoding", b"identity").strip().lower()
    if encoding != b"identity":
        raise invalid("An upload cannot be compressed: send it without Content-Encoding.")
    if call.headers.get(REFUSED):
        raise too_large(cap)  # refused by the server as it arrived (config/upload_limits.py)
    length = call.headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > cap + OVERHEAD:
        raise too_large(cap)  # refused unread
    left, quota = await sync_to_async(_quota_left)(organisation_id)
    upload = await read_upload(
        call.upload, call.headers.get(b"content-type"), cap=cap, left=left, quota=quota
    )
    try:
        purpose, expires_in = _checked(upload)
        assert upload.filename is not None
        record = await sync_to_async(service.file_create)(
            organisation_id=organisation_id,
            filename=upload.filename,
            purpose=purpose,
            content=upload.data,
            size=upload.size,
            declared_type=upload.content_type,
            expires_in=expires_in,
        )
    finally:
        upload.data.close()
    return Reply(selectors.file_object(record))


def _query(call: Call) -> dict[str, str]:
    try:
        query = parse_qs(call.query_string.decode("latin-1"), strict_parsing=False)
    except ValueError:
        raise invalid("The query string is malformed.") from None
    return {k: v[-1] for k, v in query.items()}


async def list_files(call: Call) -> Reply:
    organisation_id = _organisation_id(call)
    query = _query(call)
    limit_text = query.get("limit", str(LIST_MAX))
    digits = limit_text.isascii() and limit_text.isdigit() and len(limit_text) <= 5
    if not digits or not 1 <= int(limit_text) <= LIST_MAX:
        raise invalid(f"limit must be an integer from 1 to {LIST_MAX}.", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid("order must be 'asc' or 'desc'.", param="order")
    purpose = query.get("purpose") or None
    if purpose is not None and purpose not in PURPOSES:
        raise invalid(
            "purpose must be one of " + ", ".join(f"'{p}'" for p in PURPOSES) + ".",
            param="purpose",
        )
    page = await sync_to_async(selectors.files_page)(
        organisation_id=organisation_id,
        purpose=purpose,
        order=order,
        after=query.get("after") or None,
        limit=int(limit_text),
    )
    if page is None:
        raise invalid(f"No file with id '{query['after'][:100]}' to list after.", param="after")
    data = [selectors.file_object(record) for record in page.files]
    return Reply(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": page.has_more,
        }
    )


async def retrieve_file(call: Call) -> Reply:
    file_id = call.params["file_id"]
    record = await sync_to_async(selectors.file_get)(
        organisation_id=_organisation_id(call), file_id=file_id
    )
    if record is None:
        raise file_not_found(file_id)
    return Reply(selectors.file_object(record))


async def file_content(call: Call) -> Reply:
    """The file's content, streamed frame by frame: memory stays at one
    frame whatever the file's size. The first frame is opened before the
    status goes out, so content that does not open at all (another key, a
    moved or emptied object) is an error, never a 200; a later frame that
    fails ends the body short (``Responder.raw_stream``)."""
    file_id = call.params["file_id"]
    record = await sync_to_async(selectors.file_get)(
        organisation_id=_organisation_id(call), file_id=file_id
    )
    if record is None:
        raise file_not_found(file_id)
    frames = content_frames(
        organisation_id=record.organisation_id, file_id=record.id, name=record.storage_name
    )
    first = await _next_frame(frames)
    return Reply(
        {},
        stream=_streamed(first, frames),
        length=record.bytes,
        media_type=record.content_type.encode("ascii", "replace"),
    )


async def _next_frame(frames: Iterator[bytes]) -> bytes | None:
    # Off the thread Django's database work runs on: a slow bucket read
    # holds up no other request's queries.
    return await sync_to_async(_following, thread_sensitive=False)(frames)


def _following(frames: Iterator[bytes]) -> bytes | None:
    return next(frames, None)


async def _streamed(first: bytes | None, frames: Iterator[bytes]) -> AsyncIterator[bytes]:
    try:
        frame = first
        while frame is not None:
            yield frame
            frame = await _next_frame(frames)
    finally:
        # Closes the stored object, also when the client went part way.
        close = getattr(frames, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=False)()


async def delete_file(call: Call) -> Reply:
    file_id = call.params["file_id"]
    deleted = await sync_to_async(service.file_delete)(
        organisation_id=_organisation_id(call), file_id=file_id
    )
    if not deleted:
        raise file_not_found(file_id)
    return Reply({"id": file_id, "object": "file", "deleted": True})


FILE_OBJECT: dict[str, Any] = {
    "type": "object",
    "required": ["id", "object", "bytes", "created_at", "filename", "purpose", "status"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "file"},
        "bytes": {"type": "integer"},
        "created_at": {"type": "integer"},
        "expires_at": {"type": ["integer", "null"]},
        "filename": {"type": "string"},
        "purpose": {"enum": list(PURPOSES)},
        "status": {"const": "processed"},
        "status_details": {"type": "null"},
    },
}
FILE_SCHEMAS: dict[str, Any] = {
    "FileObject": FILE_OBJECT,
    "FileUpload": {
        "type": "object",
        "required": ["file", "purpose"],
        "properties": {
            "file": {"type": "string", "contentMediaType": "application/octet-stream"},
            "purpose": {"enum": list(PURPOSES)},
            "expires_after[anchor]": {"const": "created_at"},
            "expires_after[seconds]": {
                "type": "integer",
                "minimum": EXPIRES_MIN,
                "maximum": EXPIRES_MAX,
            },
        },
    },
    "FileList": {
        "type": "object",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"$ref": "#/components/schemas/FileObject"}},
            "first_id": {"type": ["string", "null"]},
            "last_id": {"type": ["string", "null"]},
            "has_more": {"type": "boolean"},
        },
    },
    "FileDeleted": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "file"},
            "deleted": {"const": True},
        },
    },
}

_TENANCY = "Another organisation's file, and an expired one, answer as an unknown id."

# The routes' operations (``edge/routes.Operation``'s fields), by path and method.
FILE_OPERATIONS: dict[str, dict[str, dict[str, Any]]] = {
    "/files": {
        "POST": {
            "handler": create_file,
            "operation_id": "createFile",
            "summary": "Upload a file (multipart/form-data: file, purpose, expires_after)",
            "description": "purpose: user_data or assistants. The file is refused (413) past "
            "the per-file cap or the organisation's file quota, as soon as the upload passes "
            "it. Its content is encrypted at rest with the organisation's key.",
            "request": "FileUpload",
            "request_media": "multipart/form-data",
            "answer": "The file.",
            "content": {"application/json": "FileObject"},
            "errors": (400, 401, 413),
            "streams_body": True,
        },
        "GET": {
            "handler": list_files,
            "operation_id": "listFiles",
            "summary": "The organisation's files (purpose, order, after, limit 1–10000)",
            "answer": "The files, in OpenAI's list format.",
            "content": {"application/json": "FileList"},
            "errors": (400, 401),
        },
    },
    "/files/{file_id}": {
        "GET": {
            "handler": retrieve_file,
            "operation_id": "retrieveFile",
            "summary": "Retrieve a file",
            "description": _TENANCY,
            "answer": "The file.",
            "content": {"application/json": "FileObject"},
            "errors": (401, 404),
        },
        "DELETE": {
            "handler": delete_file,
            "operation_id": "deleteFile",
            "summary": "Delete a file and its content",
            "description": _TENANCY,
            "answer": "Deleted.",
            "content": {"application/json": "FileDeleted"},
            "errors": (401, 404),
        },
    },
    "/files/{file_id}/content": {
        "GET": {
            "handler": file_content,
            "operation_id": "downloadFile",
            "summary": "A file's content, as uploaded",
            "description": _TENANCY,
            "answer": "The bytes, with the file's content type.",
            "content": {"application/octet-stream": {"type": "string"}},
            "errors": (401, 404),
        }
    },
}
