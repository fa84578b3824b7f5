"""The API's key cache: a refused key is remembered briefly, anyone sending
made-up keys cannot grow the process's memory without bound, and requests
missing the same entry together wait for one query, or for none."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from accounts.keys import hash_key
from accounts.services.api_keys import api_key_create
from responses_api.access import auth
from responses_api.protocol.errors import ApiError


def refused(raw: str) -> int:
    with pytest.raises(ApiError) as error:
        async_to_sync(auth.authenticate)(raw)
    return error.value.status


def test_refusals_are_bounded_in_number_oldest_first(db, monkeypatch):
    monkeypatch.setattr(auth, "REFUSED_ENTRIES", 3)
    monkeypatch.setattr(auth, "_refused", type(auth._refused)())
    made_up = [f"sy_sk_made-up-key-number-{i:04d}-xxxxxxxx" for i in range(5)]
    for raw in made_up:
        assert refused(raw) == 401
    assert list(auth._refused) == [hash_key(raw) for raw in made_up[-3:]]


def test_a_refusal_is_remembered_only_for_its_ttl(db, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(auth, "_refused", type(auth._refused)())
    raw = "sy_sk_" + "k" * 43
    assert refused(raw) == 401
    assert hash_key(raw) in auth._refused
    with pytest.raises(ApiError):
        auth.cached_caller(raw)  # refused from the cache, no query
    clock[0] += auth.REFUSED_TTL + 0.01
    assert auth.cached_caller(raw) is None  # expired: the database is asked again
    assert hash_key(raw) not in auth._refused


def test_a_known_key_is_served_from_the_cache(people):
    _, raw = api_key_create(organisation=people["acme"], name="cached")
    first = async_to_sync(auth.authenticate)(raw)
    assert auth.cached_caller(raw) == first


def counting_loads(monkeypatch, module, name: str) -> list[object]:
    """Each call of ``module.name`` (the database load behind a cache)."""
    calls: list[object] = []
    real = getattr(module, name)

    def counted(arg):
        calls.append(arg)
        return real(arg)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_requests_missing_a_key_together_share_one_query(people, monkeypatch):
    import asyncio

    _, raw = api_key_create(organisation=people["acme"], name="herd")
    loads = counting_loads(monkeypatch, auth, "_load")

    async def herd():
        return await asyncio.gather(*(auth.authenticate(raw) for _ in range(32)))

    callers = async_to_sync(herd)()
    assert len(loads) == 1
    assert len({c.key_id for c in callers}) == 1


def test_an_entry_just_expired_is_used_while_one_reload_runs(people, monkeypatch):
    import asyncio

    clock = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: clock[0])
    _, raw = api_key_create(organisation=people["acme"], name="stale")
    loads = counting_loads(monkeypatch, auth, "_load")

    async def scenario():
        first = await auth.authenticate(raw)
        clock[0] += 5.5  # expired (5 s), but by less than another 5 s
        # Served at once, with no await, by every request until the reload lands.
        served = [auth.cached_caller(raw) for _ in range(32)]
        assert served == [first] * 32
        assert len(auth._flights._running) == 1
        await asyncio.gather(*auth._flights._running.values())
        return auth._cache[hash_key(raw)][0]

    expiry = async_to_sync(scenario)()
    assert len(loads) == 2  # the first load, then one reload for all 32
    assert expiry == 1005.5 + 5.0
    clock[0] += 20  # long expired: the caller waits for the load
    assert auth.cached_caller(raw) is None


def test_a_key_revoked_while_it_loads_is_not_cached(people, monkeypatch):
    from accounts.audit import CLI
    from accounts.models import ApiKey
    from accounts.services.api_keys import api_key_revoke

    key, raw = api_key_create(organisation=people["acme"], name="revoked")
    real = auth._load

    def load_then_revoke(key_hash):
        loaded = real(key_hash)
        api_key_revoke(api_key=ApiKey.objects.get(pk=key.pk), actor=CLI)
        return loaded

    monkeypatch.setattr(auth, "_load", load_then_revoke)
    async_to_sync(auth.authenticate)(raw)  # the load that began before
    assert hash_key(raw) not in auth._cache
    monkeypatch.setattr(auth, "_load", real)
    assert refused(raw) == 401
