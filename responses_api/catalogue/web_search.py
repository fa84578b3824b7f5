"""An organisation's web search binding as a request reads it, and the
settings of a request's ``web_search`` tool (docs/api/web-search.md).

The binding is loaded with the organisation's catalogue (``catalog``:
cached per process, forgotten on every write of the binding), its API key
decrypted for the search only: it never leaves this process in a log or an
answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from responses_api.protocol.errors import ApiError, invalid

WEB_SEARCH_TYPES = frozenset(
    {"web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26"}
)
# search_context_size → (results, characters of each snippet) the model reads.
CONTEXT_SIZES = {"low": (3, 300), "medium": (5, 600), "high": (8, 1200)}
# search_context_size → characters of a page (open_page, find_in_page) the model reads.
PAGE_CHARS = {"low": 3000, "medium": 6000, "high": 12000}
DOMAINS_MAX = 100


@dataclass(frozen=True, slots=True)
class WebSearchBinding:
    kind: str
    base_url: str
    api_key: str = field(repr=False)
    mcp_server_label: str
    mcp_tool: str
    allow_private: bool


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """What the request's ``web_search`` tool asks of every search."""

    results: int = 5
    snippet_chars: int = 600
    page_chars: int = 6000
    allowed_domains: tuple[str, ...] = ()
    country: str | None = None


def load_web_search(organisation_id: int) -> WebSearchBinding | None:
    """The organisation's enabled binding, or None (blocking: one query)."""
    from responses_api.models import WebSearchProvider
    from responses_api.runtime.secrets import decrypt

    provider = WebSearchProvider.objects.filter(
        organisation_id=organisation_id, enabled=True
    ).first()
    if provider is None:
        return None
    return WebSearchBinding(
        kind=provider.kind,
        base_url=provider.base_url,
        api_key=decrypt(provider.api_key_encrypted),
        mcp_server_label=provider.mcp_server_label,
        mcp_tool=provider.mcp_tool,
        allow_private=provider.allow_private,
    )


def search_settings(tool: Mapping[str, Any], index: int) -> SearchSettings | ApiError:
    """The tool's settings, or the 400 naming the field that is wrong.
    Fields OpenAI defines and that change nothing here are accepted."""
    where = f"tools[{index}]"
    size = tool.get("search_context_size") or "medium"  # null: the default
    if size not in CONTEXT_SIZES:
        return invalid(
            "search_context_size is 'low', 'medium' or 'high'.",
            param=f"{where}.search_context_size",
        )
    results, chars = CONTEXT_SIZES[size]
    domains: Sequence[Any] = ()
    filters = tool.get("filters")
    if filters is not None:
        if not isinstance(filters, Mapping):
            return invalid("filters is an object.", param=f"{where}.filters")
        domains = filters.get("allowed_domains") or ()
        if (
            not isinstance(domains, list)
            or len(domains) > DOMAINS_MAX
            or not all(isinstance(d, str) and 0 < len(d) <= 253 for d in domains)
        ):
            return invalid(
                f"allowed_domains is a list of at most {DOMAINS_MAX} domain names.",
                param=f"{where}.filters.allowed_domains",
            )
    country = None
    location = tool.get("user_location")
    if location is not None:
        if not isinstance(location, Mapping) or (location.get("type") or "approximate") != (
            "approximate"
        ):
            return invalid(
                "user_location is an object of type 'approximate'.",
                param=f"{where}.user_location",
            )
        country = location.get("country") or None
        if country is not None and not (
            isinstance(country, str) and len(country) == 2 and country.isalpha()
        ):
            return invalid(
                "country is a two-letter ISO country code.",
                param=f"{where}.user_location.country",
            )
    return SearchSettings(
        results=results,
        snippet_chars=chars,
        page_chars=PAGE_CHARS[size],
        allowed_domains=tuple(_domain(d) for d in domains),
        country=country.upper() if country else None,
    )


def _domain(value: str) -> str:
    """``https://www.example.com/`` and ``example.com`` name the same domain."""
    value = value.strip().lower()
    value = value.split("://", 1)[-1].split("/", 1)[0]
    return value.removeprefix("www.").rstrip(".")
