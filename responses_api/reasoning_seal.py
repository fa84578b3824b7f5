"""Each organisation's seal for ``reasoning.encrypted_content`` tokens.

The seal itself (``translate.sealing``) is pure; this module gives it the
platform key, ``SWITCHYARD_ENCRYPTION_KEY`` (or the key derived from
``SECRET_KEY`` when unset, as ``secrets`` derives it). It reads the setting
as a comma-separated list of Fernet keys, the current one first, so that
tokens sealed under an earlier key still open once rotation lists it.
"""

from __future__ import annotations

import base64
import functools
import hashlib

from django.conf import settings

from responses_api.translate.sealing import ReasoningSeal


def reasoning_seal(organisation_id: int) -> ReasoningSeal:
    """The seal of one organisation, kept per process: its keys are derived
    once, on its first token."""
    return _seal(
        _platform_keys(settings.SWITCHYARD_ENCRYPTION_KEY, settings.SECRET_KEY), organisation_id
    )


@functools.lru_cache(maxsize=4096)
def _seal(keys: tuple[bytes, ...], organisation_id: int) -> ReasoningSeal:
    return ReasoningSeal(keys, organisation_id)


@functools.lru_cache(maxsize=8)
def _platform_keys(configured: str, secret_key: str) -> tuple[bytes, ...]:
    keys = [key.strip() for key in (configured or "").split(",") if key.strip()]
    if not keys:
        return (hashlib.sha256(secret_key.encode()).digest(),)
    return tuple(base64.urlsafe_b64decode(key) for key in keys)
