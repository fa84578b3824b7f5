"""A PDF's text, with pypdf, under guards: a page cap, a text cap and a
time budget, on top of pypdf's own caps on decompressed streams (its
``LimitReachedError``), so that a decompression bomb fails as a file
error and not as the worker's memory."""

from __future__ import annotations

import io
import logging
import time
from typing import Any

from django.conf import settings

from responses_api.retrieval.errors import ParseError, check_size

# pypdf warns on every oddity of a malformed file; those say nothing an
# operator can act on, and a hostile file could flood the log with them.
logging.getLogger("pypdf").setLevel(logging.ERROR)


def pdf_text(content: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    started = time.monotonic()
    budget = settings.SWITCHYARD_RETRIEVAL_PARSE_SECONDS
    max_pages = settings.SWITCHYARD_RETRIEVAL_MAX_PDF_PAGES
    parts: list[str] = []
    length = 0
    try:
        reader = PdfReader(io.BytesIO(content), strict=False)
        if reader.is_encrypted:
            raise ParseError("The PDF is encrypted.")
        pages = len(reader.pages)
        if pages > max_pages:
            raise ParseError(f"The PDF has {pages:,} pages, more than the {max_pages:,} allowed.")
        for number, page in enumerate(reader.pages, start=1):
            if time.monotonic() - started > budget:
                raise ParseError(
                    f"Reading the PDF took longer than {budget:g} seconds (page {number})."
                )
            _decode_contents(page)
            text = page.extract_text() or ""
            length += len(text)
            check_size(length)
            parts.append(text)
    except ParseError:
        raise
    except LimitReachedError:
        raise ParseError("The PDF decompresses past the size allowed.") from None
    except RecursionError:
        raise ParseError("The PDF is nested too deeply to read.") from None
    except Exception as error:
        # pypdf raises many kinds of error (ValueError, KeyError, its own
        # PdfReadError...) on a malformed file: each is the file's fault.
        raise ParseError(f"The PDF could not be read ({type(error).__name__}).") from None
    return "\n\n".join(parts)


def _decode_contents(page: Any) -> None:
    """Decode the page's content streams, under pypdf's caps: its text
    extraction swallows ``LimitReachedError`` (a bomb would read as an
    empty page), decoding them first lets it through. pypdf keeps the
    decoded data, so the extraction does not decode them again."""
    contents = page.get("/Contents")
    if contents is None:
        return
    contents = contents.get_object()
    streams = contents if isinstance(contents, list) else [contents]
    for stream in streams:
        stream.get_object().get_data()
