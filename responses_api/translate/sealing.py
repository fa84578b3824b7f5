"""Reasoning sealed for the client to carry (``reasoning.encrypted_content``).

Switchyard keeps nothing between stateless requests, so a client that asks
for ``include: ["reasoning.encrypted_content"]`` carries the model's reasoning
itself, as a token only this platform can open and only for the organisation
it was issued to. A token is ``sy1.`` followed by the
url-safe base64 of a 12-byte nonce and the AES-256-GCM ciphertext of the
reasoning text. The key is derived with HKDF-SHA256 from the platform key and
the organisation id, and the version prefix and organisation id are also the
associated data: a token altered by one bit, or presented by another
organisation, does not open. A token may also be bound to a *context*
(compaction summaries are bound to their model): it is added to the
associated data, so the token opens only in that context.

Pure: no Django, no I/O. The platform key is given by the caller
(``responses_api.store.seal``).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

VERSION = "sy1."
_NONCE = 12
_TAG = 16
_SALT = b"switchyard reasoning.encrypted_content"


_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class SealBroken(ValueError):
    """A token that does not open: altered, of another organisation or
    platform key, or not a token of this platform at all."""


class ReasoningSeal:
    """Seals and opens reasoning text for one organisation.

    ``keys`` are the platform's keys, the current one first: tokens are
    sealed with the first and opened with any, so that the platform key can
    be rotated without breaking conversations under way. Keys are derived on
    first use: a request that carries no reasoning costs nothing.
    """

    __slots__ = ("_aad", "_ciphers", "_keys", "_organisation")

    def __init__(self, keys: Sequence[bytes], organisation_id: int | str) -> None:
        if not keys:
            raise ValueError("a reasoning seal needs at least one platform key")
        self._keys = tuple(keys)
        self._organisation = str(organisation_id).encode()
        self._aad = VERSION.encode() + self._organisation
        self._ciphers: tuple[AESGCM, ...] | None = None

    def _derived(self) -> tuple[AESGCM, ...]:
        if self._ciphers is None:
            self._ciphers = tuple(
                AESGCM(
                    HKDF(
                        algorithm=hashes.SHA256(),
                        length=32,
                        salt=_SALT,
                        info=b"organisation:" + self._organisation,
                    ).derive(key)
                )
                for key in self._keys
            )
        return self._ciphers

    def _bound(self, context: str) -> bytes:
        return self._aad + b"\x00" + context.encode() if context else self._aad

    def seal(self, text: str, context: str = "") -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._derived()[0].encrypt(nonce, text.encode(), self._bound(context))
        return VERSION + _encode(nonce + sealed)

    def seal_bytes(self, data: bytes, context: str) -> bytes:
        """``data`` sealed as raw bytes (nonce, ciphertext, tag): the same
        keys and associated data as a token, for content kept in a file."""
        nonce = os.urandom(_NONCE)
        return nonce + self._derived()[0].encrypt(nonce, data, self._bound(context))

    def open_bytes(self, sealed: bytes, context: str) -> bytes:
        """The bytes :meth:`seal_bytes` sealed in ``context``; :class:`SealBroken` otherwise."""
        if len(sealed) < _NONCE + _TAG:
            raise SealBroken("too short")
        nonce, body = sealed[:_NONCE], sealed[_NONCE:]
        for cipher in self._derived():
            try:
                return cipher.decrypt(nonce, body, self._bound(context))
            except InvalidTag:
                continue
        raise SealBroken("does not open for this organisation")

    def open(self, token: str, context: str = "") -> str:
        """The text sealed in ``token`` (in ``context``); :class:`SealBroken` otherwise."""
        if not token.startswith(VERSION):
            raise SealBroken("not a token of this platform")
        body = token[len(VERSION) :].encode()
        padded = body.translate(_FROM_URLSAFE) + b"=" * (-len(body) % 4)
        try:
            # Lenient (and fast): what it skips makes the check below fail.
            raw = binascii.a2b_base64(padded)
        except (binascii.Error, ValueError):
            raise SealBroken("not base64") from None
        if binascii.b2a_base64(raw, newline=False) != padded or b"+" in body or b"/" in body:
            # Only the token as issued opens: not one with characters added
            # (which base64 skips) or spare bits of its last character changed.
            raise SealBroken("not as issued")
        if len(raw) < _NONCE + _TAG:
            raise SealBroken("too short")
        nonce, sealed = raw[:_NONCE], raw[_NONCE:]
        aad = self._bound(context)
        for cipher in self._derived():
            try:
                plain = cipher.decrypt(nonce, sealed, aad)
            except InvalidTag:
                continue
            try:
                return plain.decode()
            except UnicodeDecodeError:  # pragma: no cover - authenticated, so never
                break
        raise SealBroken("does not open for this organisation")
