"""API key format and hashing.

A key is ``sy_sk_`` followed by 43 URL-safe characters (256 random bits); an
admin key, for the management API only, is ``sy_admin_`` and the same.
Because the secret part is uniformly random, a plain SHA-256 is a safe
at-rest form: it can't be brute-forced, and it lets the lookup be a single
indexed equality match instead of a scan with slow password hashes.
"""

import hashlib
import secrets

KEY_PREFIX = "sy_sk_"
VISIBLE_CHARS = len(KEY_PREFIX) + 8
ADMIN_KEY_PREFIX = "sy_admin_"
ADMIN_VISIBLE_CHARS = len(ADMIN_KEY_PREFIX) + 8


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def generate_admin_key() -> str:
    return ADMIN_KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def visible_prefix(raw: str) -> str:
    return raw[:VISIBLE_CHARS]


def looks_like_key(raw: str) -> bool:
    return raw.startswith(KEY_PREFIX) and 20 <= len(raw) <= 128


def looks_like_admin_key(raw: str) -> bool:
    return raw.startswith(ADMIN_KEY_PREFIX) and 20 <= len(raw) <= 128
