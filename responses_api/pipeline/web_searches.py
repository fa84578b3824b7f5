"""Web search, the hosted kind ``web_search`` (docs/api/web-search.md): the
model is offered ``web_search({"query": …})``, and ``open_page`` and
``find_in_page`` to read what it found (``pipeline.web_pages``); each call
becomes a ``web_search_call`` item of that action. A search runs on the
search provider the organisation bound (``catalogue.web_search``): a search API
(``tools.web_search``) or a search tool of one of its registered MCP
servers. The results go back to the model numbered for the whole response,
and the answers written after them get their ``url_citation`` annotations
(``translate.citations``). A search that fails is told to the model: the
response goes on; so does a page that cannot be read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings

from responses_api.access.auth import Caller
from responses_api.catalogue.addresses import backend_policy
from responses_api.catalogue.catalog import mcp_organisation_for, web_search_for
from responses_api.catalogue.mcp_resolve import ResolvedMcpServer, resolve_mcp_tool
from responses_api.catalogue.web_search import (
    WEB_SEARCH_TYPES,
    SearchSettings,
    WebSearchBinding,
    search_settings,
)
from responses_api.pipeline.hosted import Searching
from responses_api.pipeline.mcp_calls import Offer
from responses_api.pipeline.web_pages import (
    KEPT,
    Read,
    found_text,
    opened_text,
    page_failed_text,
    page_functions,
    read_page,
)
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError
from responses_api.protocol.tools import HostedTool
from responses_api.translate.citations import Source, annotator
from responses_api.translate.hosted_calls import (
    WEB_KINDS,
    call_done,
    page_arguments,
    pending_calls,
    search_failed_text,
    search_results_text,
    web_search_query,
)
from responses_api.translate.items import Item
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.tools import HostedFunction, ToolRef

if TYPE_CHECKING:
    from responses_api.tools.web_search import Found

SOURCES_INCLUDE = "web_search_call.action.sources"
DESCRIPTION = (
    "Search the web. Returns numbered results (title, URL, snippet); cite a result you use "
    "by its number in brackets, like [1]."
)
PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What to search for."}},
    "required": ["query"],
}


@dataclass(slots=True)
class WebSearch(Searching):
    """The request's ``web_search`` tool, bound to the organisation's provider."""

    binding: WebSearchBinding
    wanted: SearchSettings
    show_sources: bool
    # A provider that is an MCP server's tool: that server, resolved.
    mcp: ResolvedMcpServer | None = None
    types: frozenset[str] = WEB_SEARCH_TYPES
    sources: list[Source] = field(default_factory=list)
    told: dict[str, str] = field(default_factory=dict)
    # The pages read, by URL, for a later find_in_page.
    pages: dict[str, Read] = field(default_factory=dict)

    def functions(self) -> list[HostedFunction]:
        ref = ToolRef(kind="web_search", name="web_search", item=("web_search_call", "ws"))
        return [HostedFunction(ref, DESCRIPTION, PARAMETERS), *page_functions()]

    def opening(self, translator: StreamTranslator) -> list[dict[str, Any]]:
        return []

    def waiting(self, translator: StreamTranslator) -> list[Item]:
        return [
            item
            for item in pending_calls(translator.items)
            if item.ref is not None and item.ref.kind in WEB_KINDS
        ]

    def refuse(self, item: Item, error: str) -> list[dict[str, Any]]:
        if item.ref is not None and item.ref.kind != "web_search":
            self.told[item.item_id] = page_failed_text(page_arguments(item)[0], error)
        else:
            self.told[item.item_id] = search_failed_text(web_search_query(item), error)
        return call_done(item, failed=True)

    async def _run(
        self, translator: StreamTranslator, item: Item, deadline: float
    ) -> list[dict[str, Any]]:
        left = deadline - time.monotonic()
        if left <= 0:
            return self.refuse(item, "The response's time for tool calls is over.")
        if item.ref is not None and item.ref.kind != "web_search":
            return await self._read(translator, item, left)
        query = web_search_query(item).strip()
        if not query:
            return self.refuse(item, "The search had no query.")
        found, error = await self._search(
            query, min(left, settings.SWITCHYARD_WEB_SEARCH_TIMEOUT_SECONDS)
        )
        if error is not None:
            return self.refuse(item, error)
        chars = self.wanted.snippet_chars
        sources = [Source(f.url, f.title, f.snippet[:chars]) for f in found]
        first = len(self.sources) + 1
        self.sources.extend(sources)
        self.told[item.item_id] = search_results_text(query, sources, first)
        translator.closing.annotate = annotator(self.sources)
        extra = {}
        if self.show_sources:
            extra["sources"] = [{"type": "url", "url": s.url} for s in sources]
        return call_done(item, failed=False, extra=extra)

    async def _read(
        self, translator: StreamTranslator, item: Item, left: float
    ) -> list[dict[str, Any]]:
        """An ``open_page`` or ``find_in_page`` (``pipeline.web_pages``)."""
        url, pattern = page_arguments(item)
        finding = item.ref is not None and item.ref.kind == "find_in_page"
        if not url:
            return self.refuse(item, "The call named no URL.")
        if finding and not pattern.strip():
            return self.refuse(item, "The call named no text to find.")
        read = self.pages.get(url)
        if read is None:
            got = await read_page(
                url,
                self.binding,
                self.wanted,
                within=min(left, settings.SWITCHYARD_WEB_SEARCH_TIMEOUT_SECONDS),
                max_bytes=settings.SWITCHYARD_WEB_PAGE_BYTES,
            )
            if isinstance(got, str):
                return self.refuse(item, got)
            read = got
            if len(self.pages) < KEPT:
                self.pages[url] = read
        number = next((n for n, s in enumerate(self.sources, 1) if s.url == url), 0)
        if not number:
            self.sources.append(Source(url, read.title, read.text[: self.wanted.snippet_chars]))
            number = len(self.sources)
            translator.closing.annotate = annotator(self.sources)
        chars = self.wanted.page_chars
        self.told[item.item_id] = (
            found_text(read, pattern, number, chars)
            if finding
            else opened_text(read, number, chars)
        )
        return call_done(item, failed=False)

    async def _search(self, query: str, within: float) -> tuple[tuple[Found, ...], str | None]:
        from responses_api.tools.web_search import Query, SearchApi, results_of_text, search

        wanted = Query(query, self.wanted.results, self.wanted.allowed_domains, self.wanted.country)
        limit = settings.SWITCHYARD_WEB_SEARCH_OUTPUT_BYTES
        if self.mcp is None:
            api = SearchApi(
                kind=self.binding.kind,
                base_url=self.binding.base_url,
                api_key=self.binding.api_key,
                policy=backend_policy(allow_private=self.binding.allow_private),
            )
            outcome = await search(api, wanted, timeout=within, max_bytes=limit)
            return outcome.results, outcome.error
        from responses_api.tools.mcp import call_tool

        called = await call_tool(
            Offer(self.mcp, ()).client(),
            self.binding.mcp_tool,
            {"query": query},
            timeout=within,
            max_output_bytes=limit,
        )
        if called.error is not None or called.is_error:
            return (), called.error or called.output[:300] or "The search tool reported an error."
        return results_of_text(called.output, wanted), None


async def web_search_kind(caller: Caller, request: CreateResponse) -> WebSearch | None:
    """The request's web search, when it offers the tool and the organisation
    bound a provider (else None: the tool is dropped with a notice)."""
    wanted = [
        (index, tool.model_dump())
        for index, tool in enumerate(request.tools or ())
        if isinstance(tool, HostedTool) and tool.type in WEB_SEARCH_TYPES
    ]
    if not wanted:
        return None
    binding = await web_search_for(caller.organisation_id)
    if binding is None:
        return None
    index, tool = wanted[0]
    settings_of = search_settings(tool, index)
    if isinstance(settings_of, ApiError):
        raise settings_of
    mcp = None
    if binding.kind == "mcp":
        organisation = await mcp_organisation_for(caller.organisation_id)
        label = binding.mcp_server_label
        resolved = resolve_mcp_tool(organisation, {"server_label": label}, index=index)
        if isinstance(resolved, ApiError):
            raise ApiError(
                424,
                f"The web search provider is the MCP server '{label}', which is not available: "
                f"{resolved.message}",
                type="external_connector_error",
                code="web_search_unavailable",
                param=f"tools[{index}]",
            )
        mcp = resolved
    include = request.include or ()
    return WebSearch(binding, settings_of, SOURCES_INCLUDE in include, mcp)
