"""``file_id`` in a request's input (SPEC §4.4): the files it names, read
for the translator, which is pure and takes only inline data.

An ``input_file`` naming a file becomes the same part with the file's
content as ``file_data`` (base64) and its name, so the translator gives it
to the model as text exactly as an inline file (a ``.txt`` or ``.csv``, at
most 1 MB); an ``input_image`` naming a file becomes a ``data:`` URL of
the image. A file the organisation does not have (unknown, expired,
another organisation's) is a 400 naming the parameter. A request without
``file_id`` is given back as it came, without a query.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

from asgiref.sync import sync_to_async

from responses_api.files.selectors import file_get
from responses_api.files.storage import content_open
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError, invalid
from responses_api.protocol.items import FilePart, ImagePart, MessageItem

# More than the translator reads of a file (1 MB): bigger files are refused
# without opening them, with the translator's own message.
MAX_INLINE_BYTES = 1024 * 1024


def _named(request: CreateResponse) -> Iterator[tuple[int, int, FilePart | ImagePart]]:
    if isinstance(request.input, str):
        return
    for i, item in enumerate(request.input):
        if isinstance(item, MessageItem) and not isinstance(item.content, str):
            for j, part in enumerate(item.content):
                if isinstance(part, FilePart | ImagePart) and part.file_id is not None:
                    yield i, j, part


def _resolved(organisation_id: int, part: FilePart | ImagePart, param: str) -> FilePart | ImagePart:
    assert part.file_id is not None
    found = file_get(organisation_id=organisation_id, file_id=part.file_id)
    if found is None:
        raise invalid(
            f"No such File object: {part.file_id[:100]}", param=param, code="file_not_found"
        )
    if found.bytes > MAX_INLINE_BYTES:
        raise ApiError(
            413,
            f"The file '{found.id}' ({found.filename}) is larger than 1 MB.",
            param=param,
            code="file_too_large",
        )
    content = content_open(
        organisation_id=organisation_id, file_id=found.id, name=found.storage_name
    )
    if isinstance(part, FilePart):
        return part.model_copy(
            update={
                "file_id": None,
                "file_data": base64.b64encode(content).decode("ascii"),
                "filename": found.filename,
            }
        )
    if not found.content_type.startswith("image/"):
        raise invalid(f"The file '{part.file_id}' ({found.filename}) is not an image.", param=param)
    url = f"data:{found.content_type};base64,{base64.b64encode(content).decode('ascii')}"
    return part.model_copy(update={"file_id": None, "image_url": url})


def _inline(organisation_id: int, request: CreateResponse) -> CreateResponse:
    items = list(request.input)
    for i, j, part in list(_named(request)):
        item = items[i]
        assert isinstance(item, MessageItem) and not isinstance(item.content, str)
        content = list(item.content)
        content[j] = _resolved(organisation_id, part, f"input[{i}].content[{j}].file_id")
        items[i] = item.model_copy(update={"content": content})
    return request.model_copy(update={"input": items})


async def files_inlined(organisation_id: int, request: CreateResponse) -> CreateResponse:
    """``request`` with the files its input names read into it."""
    if next(_named(request), None) is None:
        return request
    return await sync_to_async(_inline)(organisation_id, request)
