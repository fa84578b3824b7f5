"""The models and backends an organisation can use, cached per process.

Read on the hot path for every request, so a process keeps each
organisation's catalogue for ``SWITCHYARD_CATALOG_CACHE_SECONDS``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings

from responses_api.protocol.errors import ApiError
from responses_api.runtime.flight import Flights
from responses_api.runtime.secrets import decrypt
from responses_api.translate.request import ModelLimits

if TYPE_CHECKING:
    from responses_api.catalogue.mcp_entries import McpOrganisation, McpServerEntry
    from responses_api.catalogue.web_search import WebSearchBinding


@dataclass(frozen=True, slots=True)
class BackendEntry:
    id: str
    name: str
    base_url: str
    api_key: str
    dialect: str
    enabled: bool
    health: str
    max_concurrency: int
    extra_body: dict[str, Any]
    version: str
    # Whether requests on it must hold a lease in the shared in-flight
    # counts: it has a concurrency limit, or a model with several backends
    # compares its load with theirs (models of any organisation, a shared
    # backend serving several). Nothing else reads those counts, so a request
    # on an unlimited backend that nothing compares costs no round trip.
    counted: bool = True
    # Platform staff let this backend sit on a private or link-local
    # address (``backends.addresses``).
    allow_private: bool = False
    # Precise prefix scoring: where its KV-cache events come from, and the
    # folder of its model's tokenizer (both or neither).
    kv_events_endpoint: str = ""
    tokenizer_path: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    backend: BackendEntry
    upstream_name: str


# UsageLog.cost's decimal places.
COST_QUANTUM = Decimal(1).scaleb(-8)


@dataclass(frozen=True, slots=True)
class ModelEntry:
    id: str
    public_id: str
    limits: ModelLimits
    price_input: Decimal
    price_cached_input: Decimal
    price_output: Decimal
    routes: tuple[Route, ...]
    created_at: int
    # Seconds a non-streamed request waits for the first token.
    first_token_timeout: float = 120.0
    # ``generate`` (``/v1/responses``) or ``embed`` (``/v1/embeddings``).
    kind: str = "generate"

    def cost(self, input_tokens: int, cached: int, output: int) -> Decimal:
        uncached = max(input_tokens - cached, 0)
        total = (
            uncached * self.price_input
            + cached * self.price_cached_input
            + output * self.price_output
        )
        # Rounded to the usage row's 8 places here, once: the row, the
        # reply's cost and the month's spend counters then agree exactly.
        return (total / Decimal(1_000_000)).quantize(COST_QUANTUM, ROUND_HALF_UP)


def wrong_kind(model: ModelEntry, name: str) -> ApiError:
    """The 400 for a model asked of the endpoint of the other kind (an
    embedding model at ``/v1/responses``, a generation model at
    ``/v1/embeddings``), naming the endpoint that serves it."""
    if model.kind == "embed":
        message = (
            f"The model '{name}' is an embedding model: it does not support /v1/responses. "
            "Use it with POST /v1/embeddings, or pick a generation model from GET /v1/models."
        )
    else:
        message = (
            f"The model '{name}' does not support embeddings. Pick an embedding model "
            "from GET /v1/models for POST /v1/embeddings."
        )
    return ApiError(400, message, code="model_not_supported", param="model")


@dataclass(frozen=True, slots=True)
class Catalog:
    by_name: dict[str, ModelEntry]
    models: tuple[ModelEntry, ...]
    # The registered MCP servers and the client-server switch
    # (``catalogue.mcp_entries``); None in a catalogue built by hand.
    mcp: McpOrganisation | None = None
    # The web search provider it bound (``catalogue.web_search``), if any.
    web_search: WebSearchBinding | None = None


_cache: dict[int, tuple[float, float, Catalog]] = {}  # org → (expires, loaded, catalog)
# A model the cached catalogue doesn't know triggers a reload when the
# catalogue is older than this, so a model just added works at once.
MISS_RELOAD_AFTER = 0.05


# Loads in progress, by organisation: a load that began before a change must
# not cache what it read (responses_api.runtime.flight).
_flights = Flights("catalogue cache")


def forget(organisation_id: int | None = None) -> None:
    _flights.forget()
    if organisation_id is None:
        _cache.clear()
    else:
        _cache.pop(organisation_id, None)


def _backend_entry(backend, compared: set[Any]) -> BackendEntry:
    return BackendEntry(
        id=str(backend.id),
        name=backend.name,
        base_url=backend.base_url,
        api_key=decrypt(backend.api_key_encrypted),
        dialect=backend.dialect,
        enabled=backend.enabled,
        health=backend.health,
        max_concurrency=backend.max_concurrency,
        extra_body=dict(backend.extra_body or {}),
        version=backend.version,
        counted=backend.max_concurrency > 0 or backend.id in compared,
        allow_private=backend.allow_private,
        kv_events_endpoint=backend.kv_events_endpoint,
        tokenizer_path=backend.tokenizer_path,
    )


def _compared(backend_ids: set[Any]) -> set[Any]:
    """Those of the backends that serve, beside another backend, a model of
    any organisation (so that model's routing compares their loads)."""
    from django.db.models import Count

    from responses_api.models import Deployment, ServedModel

    if not backend_ids:
        return set()
    several = ServedModel.objects.annotate(n=Count("deployments")).filter(n__gte=2)
    return set(
        Deployment.objects.filter(backend_id__in=backend_ids, model__in=several.values("id"))
        .values_list("backend_id", flat=True)
        .distinct()
    )


def load_catalog(organisation_id: int) -> Catalog:
    from responses_api.catalogue.mcp_entries import load_mcp_organisation
    from responses_api.catalogue.web_search import load_web_search
    from responses_api.models import ServedModel

    by_name: dict[str, ModelEntry] = {}
    models = []
    queryset = ServedModel.objects.filter(organisation_id=organisation_id).prefetch_related(
        "deployments__backend"
    )
    served = list(queryset)
    compared = _compared({d.backend_id for m in served for d in m.deployments.all()})
    for model in served:
        routes = tuple(
            Route(_backend_entry(d.backend, compared), d.upstream_name)
            for d in model.deployments.all()
            if d.backend.organisation_id in (None, organisation_id)
        )
        entry = ModelEntry(
            id=str(model.id),
            public_id=model.public_id,
            limits=ModelLimits(
                context_window=model.context_window,
                max_output_tokens=model.max_output_tokens,
                default_max_output_tokens=model.default_max_output_tokens,
                temperature=model.temperature,
                top_p=model.top_p,
                supports_vision=model.supports_vision,
            ),
            price_input=model.price_input,
            price_cached_input=model.price_cached_input,
            price_output=model.price_output,
            routes=routes,
            created_at=int(model.created_at.timestamp()),
            first_token_timeout=model.first_token_timeout
            or settings.SWITCHYARD_FIRST_TOKEN_TIMEOUT,
            kind=model.kind,
        )
        models.append(entry)
        by_name[model.public_id] = entry
        for alias in model.aliases or ():
            by_name.setdefault(alias, entry)
    return Catalog(
        by_name=by_name,
        models=tuple(models),
        mcp=load_mcp_organisation(organisation_id),
        web_search=load_web_search(organisation_id),
    )


async def get_catalog(organisation_id: int, *, missing: str | None = None) -> Catalog:
    """The organisation's catalogue; ``missing`` names a model the caller did
    not find in it, which reloads a catalogue that may predate that model.

    One load at a time per organisation, and a catalogue expired less than
    ``SWITCHYARD_CATALOG_CACHE_SECONDS`` ago is served while it is reloaded
    (:mod:`responses_api.runtime.flight`)."""
    now = time.monotonic()
    hit = _cache.get(organisation_id)
    if hit is not None and (missing is None or now - hit[1] < MISS_RELOAD_AFTER):
        if hit[0] > now:
            return hit[2]
        if hit[0] + settings.SWITCHYARD_CATALOG_CACHE_SECONDS > now:
            _flights.refresh(organisation_id, lambda: _reload(organisation_id))
            return hit[2]
    return await _flights.join(organisation_id, lambda: _reload(organisation_id))


async def _reload(organisation_id: int) -> Catalog:
    from asgiref.sync import sync_to_async

    forgotten = _flights.forgotten
    started = time.monotonic()
    catalog = await sync_to_async(load_catalog)(organisation_id)
    if forgotten == _flights.forgotten:  # else changed meanwhile: not cached
        expires = started + settings.SWITCHYARD_CATALOG_CACHE_SECONDS
        _cache[organisation_id] = (expires, started, catalog)
    return catalog


async def mcp_organisation_for(
    organisation_id: int, *, missing: str | None = None
) -> McpOrganisation:
    """What ``catalogue.mcp_resolve.resolve_mcp_tool`` takes: the
    organisation's registered MCP servers, with their secrets decrypted for
    the tool loop, and whether requests may name their own servers.
    ``missing`` names a label the caller did not find, which reloads a
    catalogue that may predate it (as for a model, :func:`get_catalog`)."""
    from responses_api.catalogue.mcp_entries import McpOrganisation

    return (await get_catalog(organisation_id, missing=missing)).mcp or McpOrganisation()


async def mcp_servers_for(organisation_id: int) -> dict[str, McpServerEntry]:
    """The organisation's registered MCP servers by label; disabled ones
    included (the resolver says a disabled server is disabled). Another
    organisation's servers are never in it."""
    return dict((await mcp_organisation_for(organisation_id)).servers)


async def web_search_for(organisation_id: int) -> WebSearchBinding | None:
    """The organisation's enabled web search binding, with its key decrypted
    for the search only; never another organisation's."""
    return (await get_catalog(organisation_id)).web_search
