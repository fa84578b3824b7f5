"""What web search's ``open_page`` and ``find_in_page`` give the model
(docs/api/web-search.md): a page read by the gateway (``tools.web_page``),
made plain text, and either its text (``open_page``, cut to the tool's
``search_context_size``) or the passages around each place a pattern
occurs (``find_in_page``, matched without regard to case, as a literal:
a pattern is no regular expression a model could make slow).

A page read is a source of the response like a search result: numbered in
the same sequence (a page a search returned keeps its number), so the
answer may cite it. Pages are kept for the response, so ``find_in_page``
after ``open_page`` does not fetch again.

A URL is not limited to what the response's searches returned: a user
often gives the page to read, and the model may follow a link of a page it
read. What bounds it is the address policy: a page on loopback or a private
network is opened only where platform staff allowed the binding private
addresses, and link-local addresses and the cloud metadata service never
(a URL can be planted in any page the model reads), redirects included.
The tool's ``allowed_domains``, when it names some, bound pages too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import anyio

from responses_api.catalogue.addresses import AddressPolicy
from responses_api.catalogue.web_search import SearchSettings, WebSearchBinding
from responses_api.retrieval.parsing import ParseError, html_text, json_text
from responses_api.translate.tools import HostedFunction, ToolRef

OPEN_DESCRIPTION = (
    "Open a web page (a URL a search returned, or one you were given) and read its text. "
    "Cite it by its number in brackets, like a search result."
)
FIND_DESCRIPTION = (
    "Find a text in a web page (case does not matter): returns the passages around each "
    "place it occurs. Cite the page by its number in brackets."
)
_URL = {"type": "string", "description": "The page's http:// or https:// URL."}
OPEN_PARAMETERS = {"type": "object", "properties": {"url": _URL}, "required": ["url"]}
FIND_PARAMETERS = {
    "type": "object",
    "properties": {
        "url": _URL,
        "pattern": {"type": "string", "description": "The text to find in the page."},
    },
    "required": ["url", "pattern"],
}
# Characters of context either side of a match, and the most passages told.
AROUND = 240
PASSAGES = 10
# Pages kept per response for find_in_page.
KEPT = 16
_TITLE = re.compile(r"<title[^>]{0,200}>([^<]{1,600})</title", re.IGNORECASE)


def page_functions() -> list[HostedFunction]:
    item = ("web_search_call", "ws")
    return [
        HostedFunction(
            ToolRef(kind="open_page", name="open_page", item=item),
            OPEN_DESCRIPTION,
            OPEN_PARAMETERS,
        ),
        HostedFunction(
            ToolRef(kind="find_in_page", name="find_in_page", item=item),
            FIND_DESCRIPTION,
            FIND_PARAMETERS,
        ),
    ]


@dataclass(frozen=True, slots=True)
class Read:
    """A page as the model reads it: plain text, and a title to cite it by."""

    url: str
    title: str
    text: str


def page_policy(binding: WebSearchBinding) -> AddressPolicy:
    """Private addresses only by the binding's staff flag (never by the
    platform's setting for backends); link-local and metadata never."""
    return AddressPolicy(private=binding.allow_private, link_local=False)


async def read_page(
    url: str, binding: WebSearchBinding, wanted: SearchSettings, *, within: float, max_bytes: int
) -> Read | str:
    """The page at ``url`` made plain, or why it could not be read."""
    from responses_api.tools.web_page import fetch_page, page_url_error

    refused = page_url_error(url, wanted.allowed_domains)
    if refused is not None:
        return refused
    page = await fetch_page(
        url,
        policy=page_policy(binding),
        domains=wanted.allowed_domains,
        timeout=within,
        max_bytes=max_bytes,
    )
    if page.error is not None:
        return page.error
    text = await anyio.to_thread.run_sync(_plain, page.content_type, page.text)
    title = _TITLE.search(page.text) if page.content_type == "text/html" else None
    named = " ".join(title.group(1).split()) if title else ""
    return Read(url, named[:300] or url, text)


def _plain(content_type: str, text: str) -> str:
    if content_type == "text/html":
        return html_text(text)
    if content_type == "application/json":
        try:
            return json_text(text)
        except ParseError:
            return text
    return text


def opened_text(read: Read, number: int, chars: int) -> str:
    """What the model reads of an ``open_page``: the page, cut."""
    body = read.text if len(read.text) <= chars else read.text[:chars] + "\n[… the page goes on]"
    head = f"[{number}] {read.title}\nURL: {read.url}\nCite this page as [{number}]."
    return f"{head}\n\n{body or '(The page has no text.)'}"


def found_text(read: Read, pattern: str, number: int, chars: int) -> str:
    """What the model reads of a ``find_in_page``: each passage around a
    match (overlapping ones merged), at most :data:`PASSAGES`, cut to ``chars``."""
    head = f"[{number}] {read.title}\nURL: {read.url}\nCite this page as [{number}]."
    spans = _matches(read.text, pattern)
    if not spans:
        return f'{head}\n\n"{pattern}" does not occur in the page.'
    lines = [f'{head}\n\n"{pattern}" occurs {_times(spans)} in the page:']
    used = 0
    for start, end in spans[:PASSAGES]:
        passage = " ".join(read.text[start:end].split())
        if used + len(passage) > chars:
            lines.append("[… more passages left out]")
            break
        used += len(passage)
        lines.append(f"… {passage} …")
    return "\n\n".join(lines)


def _matches(text: str, pattern: str) -> list[tuple[int, int]]:
    """The passages around each case-insensitive occurrence of ``pattern``
    (escaped: matched as written, in time linear in the page)."""
    if not pattern.strip():
        return []
    spans: list[tuple[int, int]] = []
    for match in re.finditer(re.escape(pattern), text, re.IGNORECASE):
        start, end = max(0, match.start() - AROUND), min(len(text), match.end() + AROUND)
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def _times(spans: list[tuple[int, int]]) -> str:
    return "once" if len(spans) == 1 else f"in {len(spans)} places"


def page_failed_text(url: str, error: str) -> str:
    what = url or "the page"
    return f"Reading {what} failed: {error} Go on without it, and say so if it matters."
