"""Encryption at rest for upstream API keys (Fernet)."""

from __future__ import annotations

import base64
import functools
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@functools.cache
def _fernet() -> Fernet:
    key: str | bytes = settings.SWITCHYARD_ENCRYPTION_KEY
    if not key:
        # Derived from SECRET_KEY so the embedded default needs no setting;
        # production sets SWITCHYARD_ENCRYPTION_KEY so SECRET_KEY can rotate.
        key = base64.urlsafe_b64encode(hashlib.sha256(settings.SECRET_KEY.encode()).digest())
    return Fernet(key)


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
