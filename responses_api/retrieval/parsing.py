"""A file's text, from the formats a vector store takes: plain text,
Markdown, CSV, JSON, HTML and PDF (``pdf``).

Whatever a client uploads, the answer is text or a :class:`ParseError`
naming what is wrong, which the file's ``last_error`` shows: binary
garbage, a malformed CSV or JSON, or text past the size cap never reach
the chunker."""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser
from pathlib import PurePosixPath

import orjson

from responses_api.retrieval.errors import ParseError, check_size

TEXT_SUFFIXES = {".txt", ".text", ".log", ".md", ".markdown", ".rst"}
# Every other format the parser reads, by suffix.
FORMATS = {".csv": "csv", ".json": "json", ".html": "html", ".htm": "html", ".pdf": "pdf"}


def file_format(filename: str, content: bytes) -> str:
    """``text``, ``csv``, ``json``, ``html`` or ``pdf``: by the content's
    own signature first (a PDF named ``.txt`` is still a PDF), then the name."""
    if content.startswith(b"%PDF-"):
        return "pdf"
    suffix = PurePosixPath(filename.lower()).suffix
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix == ".pdf" and b"%PDF-" not in content[:1024]:
        archive = " (it is a ZIP archive)" if content.startswith(b"PK\x03\x04") else ""
        raise ParseError(f"The file is not a PDF{archive}: it has no PDF header.")
    if suffix in FORMATS:
        return FORMATS[suffix]
    raise ParseError(
        f"Files of type '{suffix or filename}' cannot be added to a vector store: use "
        "text, Markdown, CSV, JSON, HTML or PDF.",
        code="unsupported_file",
    )


def extract_text(content: bytes, filename: str) -> str:
    """The text to chunk, at most ``SWITCHYARD_RETRIEVAL_MAX_TEXT_CHARS``."""
    kind = file_format(filename, content)
    if kind == "pdf":
        from responses_api.retrieval.pdf import pdf_text

        text = pdf_text(content)
    else:
        decoded = decode_text(content)
        text = {"text": _same, "csv": csv_text, "json": json_text, "html": html_text}[kind](decoded)
    text = text.strip()
    check_size(len(text))
    if not text:
        raise ParseError("The file holds no text to search.")
    return text


def _same(text: str) -> str:
    return text


def decode_text(content: bytes) -> str:
    """UTF-8 (or UTF-16 with its byte-order mark); anything else, or text
    that is mostly control characters, is taken for binary."""
    check_size(len(content) // 4)  # at least a quarter of the bytes are characters
    encoding = "utf-16" if content.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
    try:
        text = content.decode(encoding)
    except UnicodeDecodeError:
        raise ParseError("The file is not text (it is not valid UTF-8).") from None
    sample = text[:65536]
    control = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f")
    if "\x00" in sample or control > len(sample) // 20:
        raise ParseError("The file is not text (it holds binary data).")
    return text


def csv_text(text: str) -> str:
    """One line per record, ``column: value`` joined, so that a chunk of
    rows still says what each value is."""
    try:
        rows = csv.reader(io.StringIO(text, newline=""), strict=True)
        header = next(rows, None)
        if header is None:
            return ""
        lines = [", ".join(header)]
        for row in rows:
            if len(row) > len(header):
                raise ParseError(
                    f"The CSV's row {rows.line_num} has {len(row)} fields, more than the "
                    f"{len(header)} of its header."
                )
            lines.append(
                " | ".join(f"{name}: {value}" for name, value in zip(header, row, strict=False))
            )
    except csv.Error as error:
        raise ParseError(f"The CSV is malformed: {error}.") from None
    return "\n".join(lines)


def json_text(text: str) -> str:
    """The document as indented JSON: keys stay next to their values."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise ParseError(f"The JSON is malformed: {error}.") from None
    return json.dumps(value, indent=1, ensure_ascii=False)


class _Text(HTMLParser):
    SKIPPED = {"script", "style", "template", "noscript", "svg", "head"}
    BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.SKIPPED:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED and self.skipping:
            self.skipping -= 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def html_text(text: str) -> str:
    """The visible text: no tags, scripts or styles; blocks on lines."""
    parser = _Text()
    parser.feed(text)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)
