"""Content parts of input messages → chat message content."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from responses_api.protocol.errors import ApiError, invalid
from responses_api.protocol.items import ContentPart, FilePart, ImagePart, RefusalPart, TextPart

MAX_FILE_BYTES = 1024 * 1024
TEXT_FILE_SUFFIXES = (".txt", ".csv")


def decode_file(part: FilePart, param: str) -> str:
    if part.file_data is None:
        # A file_id not resolved by the stage that reads files (``files.inline``).
        raise invalid("input_file by file_id is not accepted here.", param=param)
    filename = part.filename or "file.txt"
    if not filename.lower().endswith(TEXT_FILE_SUFFIXES):
        raise invalid(
            f"input_file '{filename}' is not supported: only .txt and .csv files are read.",
            param=param,
        )
    data = part.file_data or ""
    if data.startswith("data:"):
        data = data.partition(",")[2]
    if len(data) > (MAX_FILE_BYTES * 4) // 3 + 8:
        raise ApiError(
            413, f"input_file '{filename}' is larger than 1 MB.", param=param, code="file_too_large"
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"input_file '{filename}' is not valid base64.", param=param) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ApiError(
            413, f"input_file '{filename}' is larger than 1 MB.", param=param, code="file_too_large"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid(f"input_file '{filename}' is not UTF-8 text.", param=param) from None
    return f'<file name="{filename}">\n{text}\n</file>'


def text_of(parts: str | Sequence[ContentPart]) -> str:
    if isinstance(parts, str):
        return parts
    out = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, RefusalPart):
            out.append(part.refusal)
    return "".join(out)


def user_content(
    content: str | Sequence[ContentPart], param: str, *, vision: bool
) -> str | list[dict[str, Any]]:
    """A user message's content parts as chat content: a plain string when
    there is no image."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    has_image = False
    for index, part in enumerate(content):
        where = f"{param}[{index}]"
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, RefusalPart):
            parts.append({"type": "text", "text": part.refusal})
        elif isinstance(part, ImagePart):
            if not vision:
                raise invalid(
                    "This model does not accept images.", param=where, code="image_not_supported"
                )
            if part.image_url is None:
                # A file_id not resolved by the stage that reads files (``files.inline``).
                raise invalid("input_image by file_id is not accepted here.", param=where)
            has_image = True
            image: dict[str, Any] = {"url": part.image_url}
            if part.detail in {"low", "high", "auto"}:
                image["detail"] = part.detail
            parts.append({"type": "image_url", "image_url": image})
        else:
            parts.append({"type": "text", "text": decode_file(part, where)})
    if not has_image:
        # Text-only content as a plain string suits every chat template.
        return "\n\n".join(p["text"] for p in parts)
    return parts
