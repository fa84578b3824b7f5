"""Where an answer cites the sources its searches found: ``url_citation``
annotations on its ``output_text`` (docs/api/web-search.md), and
``file_citation`` ones for the files ``file_search`` found
(docs/api/file-search.md, :func:`file_citations`).

The model reads each search's results numbered ``[1]``, ``[2]``, … (one
numbering for the whole response) and is asked to cite a source by its
number in brackets. A citation is then read from the answer's text, not
trusted from the model: each ``[n]`` whose ``n`` is a source of this
response is annotated over the marker itself (``[2]`` in ``… in 1889 [2].``),
and so is each source's URL written out in full. ``[1, 3]`` and ``[1][3]``
cite both. Indexes count characters (code points) of the text, as Python
strings do. A number that is no source, or a URL that no search returned,
is left alone: a citation always points at a page a search found or the
model read (``open_page``, ``find_in_page``: numbered in the same sequence).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Annotator = Callable[[str], list[dict[str, Any]]]

_MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")


@dataclass(frozen=True, slots=True)
class Source:
    """A page a search of this response returned, or one it read:
    ``[n]`` is ``sources[n - 1]``."""

    url: str
    title: str
    snippet: str = ""


def url_citations(text: str, sources: Sequence[Source]) -> list[dict[str, Any]]:
    """The ``url_citation`` annotations of ``text``, in the order they appear."""
    found: list[tuple[int, int, Source]] = []
    for match in _MARKER.finditer(text):
        numbers = [int(n) for n in match.group(1).split(",")]
        if all(1 <= n <= len(sources) for n in numbers):
            for n in dict.fromkeys(numbers):
                found.append((match.start(), match.end(), sources[n - 1]))
    taken = [(start, end) for start, end, _ in found]
    for source in {s.url: s for s in sources}.values():
        start = text.find(source.url)
        while start != -1:
            end = start + len(source.url)
            if not any(a < end and start < b for a, b in taken):
                found.append((start, end, source))
                taken.append((start, end))
            start = text.find(source.url, end)
    found.sort(key=lambda hit: hit[0])
    return [
        {
            "type": "url_citation",
            "start_index": start,
            "end_index": end,
            "url": source.url,
            "title": source.title,
        }
        for start, end, source in found
    ]


@dataclass(frozen=True, slots=True)
class FileSource:
    """A chunk of a file a ``file_search`` of this response returned."""

    file_id: str
    filename: str
    text: str
    score: float = 0.0
    attributes: dict[str, Any] = field(default_factory=dict)


def file_citations(text: str, sources: Sequence[FileSource]) -> list[dict[str, Any]]:
    """The ``file_citation`` annotations of ``text``, by index.

    Each ``[n]`` whose ``n`` is a result of this response cites that
    result's file at the marker's start (the end of what it supports); a
    file's name written out in full cites it at the name's end. A file is
    cited once at one index; a number that is no result is left alone."""
    found: dict[tuple[int, str], FileSource] = {}
    for match in _MARKER.finditer(text):
        numbers = [int(n) for n in match.group(1).split(",")]
        if all(1 <= n <= len(sources) for n in numbers):
            for n in numbers:
                source = sources[n - 1]
                found.setdefault((match.start(), source.file_id), source)
    for source in {s.file_id: s for s in sources if s.filename}.values():
        start = text.find(source.filename)
        while start != -1:
            end = start + len(source.filename)
            found.setdefault((end, source.file_id), source)
            start = text.find(source.filename, end)
    return [
        {
            "type": "file_citation",
            "file_id": source.file_id,
            "filename": source.filename,
            "index": index,
        }
        for (index, _), source in sorted(found.items(), key=lambda hit: hit[0])
    ]


def file_annotator(sources: Sequence[FileSource]) -> Annotator:
    kept = tuple(sources)
    return lambda text: file_citations(text, kept)


def annotator(sources: Sequence[Source]) -> Annotator:
    """What the stream translator calls on each answer's text once it is whole."""
    kept = tuple(sources)
    return lambda text: url_citations(text, kept)
