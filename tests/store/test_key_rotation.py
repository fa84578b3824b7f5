"""Stored content stays readable while the platform's key rotates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.test import override_settings

from responses_api.runtime import secrets

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


@pytest.fixture(autouse=True)
def _fresh_keys() -> Iterator[None]:
    secrets._fernet.cache_clear()
    yield
    secrets._fernet.cache_clear()


def _under(**keys: str):
    secrets._fernet.cache_clear()
    return override_settings(
        SWITCHYARD_ENCRYPTION_KEY=keys.get("key", ""),
        SWITCHYARD_ENCRYPTION_KEYS_OLD=keys.get("old", ""),
    )


def test_a_token_of_the_old_key_opens_while_it_is_listed_and_rotates_to_the_new_one():
    with _under(key=OLD):
        token = secrets.encrypt_bytes(b"kept")
    with _under(key=f"{NEW},{OLD}"):
        assert secrets.decrypt_bytes(token) == b"kept"
    with _under(key=NEW, old=OLD):
        assert secrets.decrypt_bytes(token) == b"kept"
        rotated = secrets.rotate(token)
    with _under(key=NEW):
        assert secrets.decrypt_bytes(rotated) == b"kept"
        with pytest.raises(InvalidToken):
            secrets.decrypt_bytes(token)
