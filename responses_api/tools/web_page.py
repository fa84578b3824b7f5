"""The pages web search's ``open_page`` and ``find_in_page`` read
(docs/api/web-search.md), fetched by the gateway itself over HTTP(S).

The URL comes from the model, so from whatever text it read: a page is
untrusted, and so is where it points. The connection is made under an
address policy (``tools.connection``: the name is resolved and every
address judged at connect time, so a name that resolves to loopback or to
the metadata service is refused as an IP literal is); a redirect is
followed by hand, at most :data:`REDIRECTS` times, each hop judged again
(scheme, allowed domains, and its address at its own connect). The bytes
read are capped, a compressed page is refused (a few kilobytes of gzip can
be gigabytes of text), the whole fetch is bounded in time, and only
text/html, text/plain and application/json are read. Nothing here raises
for what a server does: :func:`fetch_page` returns the page or one
sentence saying why not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urljoin

import anyio
import httpx2

from responses_api.catalogue.addresses import AddressPolicy
from responses_api.tools.connection import Guard, http_client, url_error
from responses_api.tools.web_search import on_domains

REDIRECTS = 3
TEXT_TYPES = frozenset({"text/html", "text/plain", "application/json"})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_CHARSET = re.compile(r"charset=[\"']?([A-Za-z0-9_.:-]{1,40})", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Page:
    """A page as it was read: where it ended (after redirects), its type
    (without parameters) and its text, decoded but not yet made plain."""

    url: str
    content_type: str = ""
    text: str = ""
    error: str | None = None


def page_url_error(url: str, domains: Sequence[str] = ()) -> str | None:
    """Why the model may not open ``url``, or None."""
    if url_error(url) is not None:
        return "Only an http:// or https:// URL, without credentials in it, can be opened."
    if not on_domains(url, domains):
        return "The URL is not on the domains this search is limited to."
    return None


async def fetch_page(
    url: str,
    *,
    policy: AddressPolicy,
    domains: Sequence[str] = (),
    timeout: float,  # noqa: ASYNC109
    max_bytes: int,
) -> Page:
    """Read one page; see the module's docstring for what may come back."""
    guard = Guard(policy, max_bytes)
    headers = {
        "Accept": "text/html, text/plain, application/json;q=0.9",
        "User-Agent": "Switchyard web search",
    }
    outcome = Page(url, error="The page could not be read.")
    with anyio.move_on_after(timeout) as scope:
        guard.scope = scope
        try:
            async with http_client(guard, headers, timeout) as client:
                outcome = await _follow(client, url, domains)
        except httpx2.HTTPError:
            outcome = Page(url, error=_wire_error(guard))
        except OSError:
            outcome = Page(url, error="The page's server could not be reached.")
    if scope.cancelled_caught:
        if guard.aborted:
            return Page(url, error="The page was sent compressed, which is refused.")
        if guard.exceeded:
            return Page(url, error=f"The page is larger than {max_bytes} bytes.")
        return Page(url, error=f"The page did not load within {timeout:g} seconds.")
    return outcome


async def _follow(client: httpx2.AsyncClient, url: str, domains: Sequence[str]) -> Page:
    for _ in range(REDIRECTS + 1):
        request = client.build_request("GET", url)
        response = await client.send(request, stream=True)
        try:
            status = response.status_code
            if status in _REDIRECT_STATUSES and "location" in response.headers:
                target = urljoin(url, response.headers["location"])
                if (refused := page_url_error(target, domains)) is not None:
                    return Page(url, error=f"The page redirects to {target[:200]}: {refused}")
                url = target
                continue
            if status != 200:
                return Page(url, error=f"The page's server answered with HTTP status {status}.")
            kind, charset = _content_type(response.headers.get("content-type", ""))
            if kind not in TEXT_TYPES:
                said = kind or "no content type"
                return Page(url, error=f"The page is {said[:80]}, not text or HTML.")
            body = await response.aread()
        finally:
            await response.aclose()
        return Page(url, kind, _decoded(body, charset))
    return Page(url, error=f"The page redirects more than {REDIRECTS} times.")


def _content_type(header: str) -> tuple[str, str]:
    kind = header.split(";", 1)[0].strip().lower()
    found = _CHARSET.search(header)
    return kind, (found.group(1) if found else "utf-8")


def _decoded(body: bytes, charset: str) -> str:
    try:
        return body.decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", errors="replace")


def _wire_error(guard: Guard) -> str:
    if guard.refusal:
        return "The page's address is refused: it is not on the public internet."
    if guard.aborted:
        return "The page was sent compressed, which is refused."
    if guard.exceeded:
        return f"The page is larger than {guard.limit} bytes."
    return "The page's server could not be reached, or broke the connection."
