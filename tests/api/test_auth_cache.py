"""The API's key cache: a refused key is remembered briefly, and anyone
sending made-up keys cannot grow the process's memory without bound."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from accounts.keys import hash_key
from accounts.services import api_key_create
from responses_api import auth
from responses_api.errors import ApiError


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
