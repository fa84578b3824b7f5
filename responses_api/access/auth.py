"""API-key authentication for the API, served from a short cache.

A hit costs a dict lookup; a miss is one indexed query on the key's hash,
one per key however many requests miss at once. An entry expired less than
``SWITCHYARD_AUTH_CACHE_SECONDS`` ago is still used while it is reloaded
(:mod:`responses_api.runtime.flight`). Revocation through
:func:`accounts.services.api_keys.api_key_revoke` drops the entry in that process
at once; other processes see it within ``SWITCHYARD_AUTH_CACHE_SECONDS`` of
their entry's last load, plus that reload's time.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from accounts.keys import hash_key, looks_like_key
from accounts.models import ApiKey
from responses_api.protocol.errors import ApiError
from responses_api.runtime.flight import Flights


@dataclass(frozen=True, slots=True)
class Caller:
    key_id: str
    key_hash: str
    prefix: str
    organisation_id: int
    organisation_slug: str
    retention_policy: str
    store_ttl_hours: int
    allowed_models: frozenset[str]
    expires_at: datetime | None
    rpm: int | None
    tpm: int | None
    concurrency: int | None
    org_rpm: int | None
    org_tpm: int | None
    org_concurrency: int | None
    # Spend limits per calendar month (responses_api.usage.spend).
    monthly_budget: Decimal | None = None
    monthly_tokens: int | None = None
    org_monthly_budget: Decimal | None = None
    org_monthly_tokens: int | None = None
    budget_warning_percent: int = 80


# Keys found, by hash: (expiry, caller). Bounded by the number of keys.
_cache: dict[str, tuple[float, Caller]] = {}
# Keys refused, by hash: expiry. Anyone can send made-up keys, so this one
# is bounded in size (the oldest refusal goes first) as well as in time.
_refused: OrderedDict[str, float] = OrderedDict()
REFUSED_TTL = 1.0
REFUSED_ENTRIES = 10_000


def unauthorized() -> ApiError:
    return ApiError(
        401,
        "Incorrect API key provided. You can find and create API keys in the Switchyard console.",
        code="invalid_api_key",
    )


def key_from_headers(headers: dict[bytes, bytes]) -> str | None:
    value = headers.get(b"authorization")
    if value is not None:
        scheme, _, token = value.decode("latin-1").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        return None
    value = headers.get(b"x-api-key")
    if value:
        return value.decode("latin-1").strip()
    return None


# Loads in progress, by hash: a load that began before a revocation must
# not put the key back (responses_api.runtime.flight).
_flights = Flights("API key cache")


def forget_key(key_hash: str) -> None:
    _flights.forget()
    _cache.pop(key_hash, None)
    _refused.pop(key_hash, None)


def _load(key_hash: str) -> Caller | None:
    key = (
        ApiKey.objects.select_related("organisation")
        .filter(key_hash=key_hash, revoked_at__isnull=True)
        .first()
    )
    if key is None:
        return None
    org = key.organisation
    return Caller(
        key_id=str(key.id),
        key_hash=key.key_hash,
        prefix=key.prefix,
        organisation_id=org.id,
        organisation_slug=org.slug,
        retention_policy=org.retention_policy,
        store_ttl_hours=org.store_ttl_hours,
        allowed_models=frozenset(key.allowed_models or ()),
        expires_at=key.expires_at,
        rpm=key.rpm,
        tpm=key.tpm,
        concurrency=key.concurrency,
        org_rpm=org.default_rpm,
        org_tpm=org.default_tpm,
        org_concurrency=org.default_concurrency,
        monthly_budget=key.monthly_budget,
        monthly_tokens=key.monthly_tokens,
        org_monthly_budget=org.monthly_budget,
        org_monthly_tokens=org.monthly_tokens,
        budget_warning_percent=org.budget_warning_percent,
    )


def cached_caller(raw: str | None) -> Caller | None:
    """The caller for ``raw`` from the cache, or None when the database must
    be asked. Raises the 401 for a malformed key and for a cached refusal, so
    the common case needs no await at all."""
    # An admin key (sy_admin_…) is for the management API only: here it is
    # malformed, and refused like any other bad key.
    if not raw or not looks_like_key(raw):
        raise unauthorized()
    key_hash = hash_key(raw)
    now = time.monotonic()
    hit = _cache.get(key_hash)
    if hit is not None:
        if hit[0] > now:
            return _checked(hit[1])
        if hit[0] + settings.SWITCHYARD_AUTH_CACHE_SECONDS > now:
            # Expired moments ago: still used while one reload runs for all.
            _flights.refresh(key_hash, lambda: _reload(key_hash))
            return _checked(hit[1])
    refused = _refused.get(key_hash)
    if refused is not None:
        if refused > now:
            raise unauthorized()
        del _refused[key_hash]
    return None


async def authenticate(raw: str | None) -> Caller:
    caller = cached_caller(raw)
    if caller is not None:
        return caller
    key_hash = hash_key(raw or "")
    return _checked(await _flights.join(key_hash, lambda: _reload(key_hash)))


async def _reload(key_hash: str) -> Caller | None:
    from asgiref.sync import sync_to_async

    forgotten = _flights.forgotten
    loaded = await sync_to_async(_load)(key_hash)
    if forgotten != _flights.forgotten:
        return loaded  # revoked meanwhile: not cached
    now = time.monotonic()
    if loaded is None:
        _cache.pop(key_hash, None)
        _refused[key_hash] = now + REFUSED_TTL
        _refused.move_to_end(key_hash)
        while len(_refused) > REFUSED_ENTRIES:
            _refused.popitem(last=False)
    else:
        _cache[key_hash] = (now + settings.SWITCHYARD_AUTH_CACHE_SECONDS, loaded)
    return loaded


def _checked(caller: Caller | None) -> Caller:
    if caller is None:
        raise unauthorized()
    if caller.expires_at is not None and caller.expires_at <= timezone.now():
        raise unauthorized()
    return caller


def organisation_caller(organisation_id: int) -> Caller:
    """The caller for work an organisation's own features do with no API key
    behind it (indexing a vector store's files in a worker): its usage rows
    name no key, and it runs under the organisation's limits only. Raises
    ``Organisation.DoesNotExist`` for an unknown id."""
    from accounts.models import Organisation

    org = Organisation.objects.get(pk=organisation_id)
    return Caller(
        key_id="",
        key_hash="",
        prefix="",
        organisation_id=org.id,
        organisation_slug=org.slug,
        retention_policy=org.retention_policy,
        store_ttl_hours=org.store_ttl_hours,
        allowed_models=frozenset(),
        expires_at=None,
        rpm=None,
        tpm=None,
        concurrency=None,
        org_rpm=org.default_rpm,
        org_tpm=org.default_tpm,
        org_concurrency=org.default_concurrency,
        org_monthly_budget=org.monthly_budget,
        org_monthly_tokens=org.monthly_tokens,
        budget_warning_percent=org.budget_warning_percent,
    )
