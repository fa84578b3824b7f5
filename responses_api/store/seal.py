"""Each organisation's seal for ``reasoning.encrypted_content`` tokens.

The seal itself (``translate.sealing``) is pure; this module gives it the
platform key, ``SWITCHYARD_ENCRYPTION_KEY`` (or the key derived from
``SECRET_KEY`` when unset, as ``secrets`` derives it). It reads the setting
as a comma-separated list of Fernet keys, the current one first, so that
tokens sealed under an earlier key still open once rotation lists it (there
or in ``SWITCHYARD_ENCRYPTION_KEYS_OLD``).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets

from django.conf import settings

from responses_api.runtime.secrets import seal_keys
from responses_api.translate.sealing import ReasoningSeal


def reasoning_seal(organisation_id: int) -> ReasoningSeal:
    """The seal of one organisation, kept per process: its keys are derived
    once, on its first token. Costs a settings read and a cache hit."""
    return _seal(seal_keys(), organisation_id)


@functools.lru_cache(maxsize=4096)
def _seal(keys: tuple[bytes, ...], organisation_id: int) -> ReasoningSeal:
    return ReasoningSeal(keys, organisation_id)


def cache_salt(organisation_id: int) -> str:
    """The organisation's salt for a backend's prefix cache
    (``translate.dialects.apply_cache_salt``): stable, so its own requests
    keep hitting the cache, and keyed with ``SECRET_KEY``, so no one can
    compute another organisation's salt and share its cached prefixes."""
    return _salt(settings.SECRET_KEY, organisation_id)


@functools.lru_cache(maxsize=4096)
def _salt(secret_key: str, organisation_id: int) -> str:
    message = f"prefix-cache:{organisation_id}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()


# An MCP approval request's id: ``mcpr_``, a nonce, and a MAC over the
# organisation, the nonce and the call, keyed with SECRET_KEY. Sent back
# with the request item (stored, or re-sent by a client of an organisation
# that stores nothing), it proves the call is one this server asked about.
_NONCE_HEX = 16
_MAC_HEX = 32


def approval_id(organisation_id: int, server_label: str, name: str, arguments: str) -> str:
    nonce = secrets.token_hex(_NONCE_HEX // 2)
    return f"mcpr_{nonce}{_approval_mac(organisation_id, nonce, server_label, name, arguments)}"


def approval_sealed(
    organisation_id: int, approval_id: str, server_label: str, name: str, arguments: str
) -> bool:
    """Whether ``approval_id`` was issued by :func:`approval_id` for this
    organisation and exactly this call."""
    body = approval_id.removeprefix("mcpr_")
    if len(body) != _NONCE_HEX + _MAC_HEX or body == approval_id:
        return False
    nonce, mac = body[:_NONCE_HEX], body[_NONCE_HEX:]
    expected = _approval_mac(organisation_id, nonce, server_label, name, arguments)
    return hmac.compare_digest(mac, expected)


def _approval_mac(
    organisation_id: int, nonce: str, server_label: str, name: str, arguments: str
) -> str:
    message = "\x00".join(
        ("mcp-approval", str(organisation_id), nonce, server_label, name, arguments)
    ).encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()[:_MAC_HEX]
