"""Encryption at rest (Fernet): upstream API keys and stored responses.

A :class:`MultiFernet` over the platform's keys, so that keys rotate: the
first key of ``SWITCHYARD_ENCRYPTION_KEY`` encrypts, every key there and in
``SWITCHYARD_ENCRYPTION_KEYS_OLD`` decrypts (:func:`rotate` re-encrypts a
token under the first key)."""

from __future__ import annotations

import base64
import functools
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class _Ring(MultiFernet):
    """The platform's keys; ``first`` the one that encrypts."""

    def __init__(self, fernets: list[Fernet]) -> None:
        super().__init__(fernets)
        self.first = fernets[0]


@functools.cache
def _fernet() -> _Ring:
    listed = f"{settings.SWITCHYARD_ENCRYPTION_KEY},{settings.SWITCHYARD_ENCRYPTION_KEYS_OLD}"
    keys: list[str | bytes] = [k.strip() for k in listed.split(",") if k.strip()]
    if not settings.SWITCHYARD_ENCRYPTION_KEY:
        # Derived from SECRET_KEY so the embedded default needs no setting;
        # production sets SWITCHYARD_ENCRYPTION_KEY so SECRET_KEY can rotate.
        derived = base64.urlsafe_b64encode(hashlib.sha256(settings.SECRET_KEY.encode()).digest())
        keys.insert(0, derived)
    return _Ring([Fernet(key) for key in keys])


def encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode() if value else ""


def decrypt(value: str) -> str:
    if not value:
        return ""
    try:
        return _fernet().decrypt(value.encode()).decode()
    except InvalidToken:
        # A key encrypted under another key cannot be used; calling the
        # backend without it gives a clear 401 from the backend.
        return ""


def encrypt_bytes(value: bytes) -> str:
    return _fernet().encrypt(value).decode("ascii")


def decrypt_bytes(token: str) -> bytes:
    """Raises :class:`InvalidToken` for a token no configured key opens."""
    return _fernet().decrypt(token.encode("ascii"))


def rotate(token: str) -> str:
    """``token`` encrypted again under the first key."""
    return _fernet().rotate(token.encode("ascii")).decode("ascii")


def decrypt_rotating(token: str) -> tuple[bytes, str | None]:
    """The plain bytes, and ``token`` encrypted again under the first key
    when it was under another (None when it is current already), for what
    rewrites stored tokens after a rotation and must not write twice.
    Raises :class:`InvalidToken` for a token no configured key opens."""
    raw = token.encode("ascii")
    try:
        return _fernet().first.decrypt(raw), None
    except InvalidToken:
        plain = _fernet().decrypt(raw)
        return plain, _fernet().first.encrypt(plain).decode("ascii")


def seal_keys() -> tuple[bytes, ...]:
    """The platform keys an organisation's seal (``translate.sealing``) is
    derived from, the current one first: ``SWITCHYARD_ENCRYPTION_KEY`` and
    ``SWITCHYARD_ENCRYPTION_KEYS_OLD``, or one derived from ``SECRET_KEY``."""
    configured = settings.SWITCHYARD_ENCRYPTION_KEY
    if configured:
        retired = settings.SWITCHYARD_ENCRYPTION_KEYS_OLD
        return _seal_keys(f"{configured},{retired}" if retired else configured, "")
    return _seal_keys("", settings.SECRET_KEY)


@functools.lru_cache(maxsize=16)
def _seal_keys(configured: str, secret_key: str) -> tuple[bytes, ...]:
    keys = [key.strip() for key in configured.split(",") if key.strip()]
    if not keys:
        return (hashlib.sha256(secret_key.encode()).digest(),)
    return tuple(base64.urlsafe_b64decode(key) for key in keys)
