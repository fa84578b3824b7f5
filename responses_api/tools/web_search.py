"""The search APIs behind ``web_search`` (docs/api/web-search.md): SearXNG's
JSON API, Brave Search and Tavily, over HTTP. (A search tool of an MCP
server goes through ``tools.mcp``; :func:`results_of_text` reads its output.)

A provider's answer is untrusted input, as an MCP server's is: the
connection is made under the backend address policy
(``tools.connection``: a name that resolves to the cloud's metadata
service is refused at connect time), the bytes read are capped, the whole
search is bounded in time, a compressed answer is refused, and an answer
that is not the JSON expected fails the search with one sentence. Nothing
here raises for what a provider does: :func:`search` returns the results
or the sentence, and the response goes on. The API key is sent, never
written into a message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import orjson

from responses_api.catalogue.addresses import AddressPolicy
from responses_api.tools.connection import Guard, http_client

SNIPPET_CHARS = 1200
TITLE_CHARS = 300
URL_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Found:
    """One result of a search."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    results: tuple[Found, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class SearchApi:
    """A search API an organisation bound (``models.WebSearchProvider``)."""

    kind: str  # "searxng", "brave" or "tavily"
    base_url: str
    api_key: str = field(default="", repr=False)
    policy: AddressPolicy | None = None


@dataclass(frozen=True, slots=True)
class Query:
    """What the model asked, with the request's tool settings."""

    text: str
    count: int
    allowed_domains: tuple[str, ...] = ()
    country: str | None = None


_NAMES = {"searxng": "SearXNG", "brave": "Brave Search", "tavily": "Tavily"}


async def search(
    api: SearchApi,
    query: Query,
    *,
    timeout: float,  # noqa: ASYNC109
    max_bytes: int,
) -> SearchOutcome:
    """Run one search; see the module's docstring for what may come back."""
    from responses_api.catalogue.addresses import backend_policy

    name = _NAMES.get(api.kind, api.kind)
    guard = Guard(api.policy or backend_policy(allow_private=False), max_bytes)
    headers = {"Accept": "application/json", "User-Agent": "Switchyard web search"}
    with anyio.move_on_after(timeout) as scope:
        guard.scope = scope
        try:
            async with http_client(guard, headers, timeout) as client:
                response = await _ask(client, api, query)
                body = response.content
        except httpx2.HTTPError:
            return SearchOutcome(error=_wire_error(name, guard))
        except OSError:
            return SearchOutcome(error=f"{name} could not be reached.")
    if scope.cancelled_caught:
        if guard.exceeded:
            return SearchOutcome(error=f"{name}'s answer was larger than {max_bytes} bytes.")
        return SearchOutcome(error=f"{name} did not answer within {timeout:g} seconds.")
    if response.status_code != 200:
        return SearchOutcome(error=f"{name} answered with HTTP status {response.status_code}.")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return SearchOutcome(error=f"{name}'s answer was not valid JSON.")
    found = _results(api.kind, data)
    if found is None:
        return SearchOutcome(error=f"{name}'s answer did not hold search results.")
    return SearchOutcome(results=kept(found, query))


async def _ask(client: httpx2.AsyncClient, api: SearchApi, query: Query) -> httpx2.Response:
    base = api.base_url.rstrip("/")
    text = query.text
    if query.allowed_domains and api.kind != "tavily":
        text += " (" + " OR ".join(f"site:{d}" for d in query.allowed_domains) + ")"
    if api.kind == "searxng":
        params = {"q": text, "format": "json"}
        headers = {"Authorization": f"Bearer {api.api_key}"} if api.api_key else {}
        return await client.get(f"{base}/search", params=params, headers=headers)
    if api.kind == "brave":
        params = {"q": text, "count": str(min(query.count, 20))}
        if query.country:
            params["country"] = query.country
        headers = {"X-Subscription-Token": api.api_key}
        return await client.get(f"{base}/res/v1/web/search", params=params, headers=headers)
    body: dict[str, Any] = {"query": text, "max_results": min(query.count, 20)}
    if query.allowed_domains:
        body["include_domains"] = list(query.allowed_domains)
    if query.country:
        body["country"] = query.country
    return await client.post(
        f"{base}/search", json=body, headers={"Authorization": f"Bearer {api.api_key}"}
    )


def _wire_error(name: str, guard: Guard) -> str:
    if guard.refusal:
        return f"{name} could not be reached: its address is refused."
    if guard.aborted:
        return f"{name} sent a compressed answer, which is refused."
    if guard.exceeded:
        return f"{name}'s answer was larger than {guard.limit} bytes."
    return f"{name} could not be reached, or broke the connection."


def _results(kind: str, data: Any) -> list[Found] | None:
    """The results of a provider's answer, or None when it holds none of
    the shape expected: SearXNG and Tavily list ``results`` (``content``),
    Brave ``web.results`` (``description``)."""
    if kind == "brave":
        web = data.get("web") if isinstance(data, dict) else None
        if isinstance(data, dict) and web is None and "query" in data:
            return []  # Brave leaves ``web`` out when nothing was found
        rows = web.get("results") if isinstance(web, dict) else None
        text_key = "description"
    else:
        rows = data.get("results") if isinstance(data, dict) else None
        text_key = "content"
    if not isinstance(rows, list):
        return None
    return [found for row in rows if (found := _found(row, text_key)) is not None]


def _found(row: object, text_key: str) -> Found | None:
    if not isinstance(row, dict):
        return None
    url, title = row.get("url"), row.get("title")
    snippet = row.get(text_key) or row.get("snippet") or ""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    if len(url) > URL_CHARS or any(c.isspace() for c in url):
        return None
    return Found(
        title=_plain(title if isinstance(title, str) else url, TITLE_CHARS),
        url=url,
        snippet=_plain(snippet if isinstance(snippet, str) else "", SNIPPET_CHARS),
    )


_TAGS = re.compile(r"<[^>]{0,200}>")


def _plain(text: str, limit: int) -> str:
    """A title or snippet as the model reads it: Brave marks matches with
    ``<strong>``; no control character, on one line, cut."""
    text = _TAGS.sub("", text)
    text = "".join(c if c >= " " else " " for c in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def kept(found: Sequence[Found], query: Query) -> tuple[Found, ...]:
    """The results the model may read: on an allowed domain (when the tool
    names some; a provider may not honour ``site:``), each URL once, at
    most ``query.count``."""
    seen: set[str] = set()
    out: list[Found] = []
    for row in found:
        if row.url in seen or not on_domains(row.url, query.allowed_domains):
            continue
        seen.add(row.url)
        out.append(row)
        if len(out) == query.count:
            break
    return tuple(out)


def on_domains(url: str, domains: Sequence[str]) -> bool:
    if not domains:
        return True
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains)


_URL = re.compile(r"https?://[^\s<>\"')\]]+")


def results_of_text(text: str, query: Query) -> tuple[Found, ...]:
    """The results of an MCP search tool's output: a JSON list of results
    (or an object with ``results``) of ``title``, ``url`` and ``snippet``
    (or ``content``, ``description``); else the URLs its text names."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        data = None
    rows = data.get("results") if isinstance(data, dict) else data
    if isinstance(rows, list):
        found = [
            f
            for row in rows
            if (f := _found(row, "content")) is not None
            or (isinstance(row, dict) and (f := _found(row, "description")) is not None)
        ]
        return kept(found, query)
    urls = [url.rstrip(".,;:") for url in _URL.findall(text)]
    return kept([Found(title=url, url=url, snippet="") for url in urls], query)
