"""The words of a text as the keyword index holds them: normalised, then
hashed with the organisation's key, so that the database holds no word of
a chunk in the clear (docs/reference/retrieval.md, "Encryption").

Normalisation, the same for chunks and queries: Unicode NFKC, case folded,
words of letters and digits, a short list of English stop words dropped,
and a plural's final ``s`` folded (``files`` matches ``file``). A term's
hash is 60 bits of HMAC-SHA256, spelt in the letters ``a``–``p`` so that
both SQLite's and PostgreSQL's tokenisers take it as one plain word."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import unicodedata

from django.conf import settings

WORD = re.compile(r"\w+")
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "do",
        "does",
        "did",
        "can",
        "you",
        "your",
    ]
)
LETTERS = bytes.maketrans(b"0123456789abcdef", b"abcdefghijklmnop")
# Bounds the work of one query; longer queries keep their first words.
MAX_QUERY_TERMS = 64


def words(text: str) -> list[str]:
    """The normalised words of ``text``, in order, repeats kept."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found = []
    for word in WORD.findall(folded):
        if word in STOP_WORDS or word == "_" * len(word):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.append(word[:64])
    return found


def rewrite(query: str) -> str:
    """``rewrite_query``: the query as the words the index matches, in
    order, without repeats (what the search page reports as ``search_query``)."""
    return " ".join(dict.fromkeys(words(query)))


@functools.lru_cache(maxsize=1024)
def _key(organisation_id: int, secret: str) -> bytes:
    return hmac.new(secret.encode(), f"terms:{organisation_id}".encode(), hashlib.sha256).digest()


def term_key(organisation_id: int) -> bytes:
    """From the first encryption key (or SECRET_KEY when none is set), as the
    content's encryption is: whoever reads the database has neither."""
    return term_keys(organisation_id)[0]


def term_keys(organisation_id: int) -> tuple[bytes, ...]:
    """The organisation's term key under each listed encryption key, the
    current one first: during a rotation, chunks indexed before it hold
    hashes under a retired key until ``manage.py reindex_keywords`` has
    rewritten them, and a query looks for both."""
    listed = f"{settings.SWITCHYARD_ENCRYPTION_KEY},{settings.SWITCHYARD_ENCRYPTION_KEYS_OLD}"
    secrets = [key.strip() for key in listed.split(",") if key.strip()]
    if not settings.SWITCHYARD_ENCRYPTION_KEY.strip():
        secrets.insert(0, base64.b64encode(settings.SECRET_KEY.encode()).decode())
    return tuple(dict.fromkeys(_key(organisation_id, secret) for secret in secrets))


def hashed(key: bytes, word: str) -> str:
    digest = hmac.new(key, word.encode(), hashlib.sha256).hexdigest()[:15]
    return digest.encode().translate(LETTERS).decode()


def index_terms(organisation_id: int, text: str) -> str:
    """What a chunk's ``terms`` column holds: one hashed word per word."""
    key = term_key(organisation_id)
    cache: dict[str, str] = {}
    out = []
    for word in words(text):
        if word not in cache:
            cache[word] = hashed(key, word)
        out.append(cache[word])
    return " ".join(out)


def query_terms(organisation_id: int, query: str) -> list[str]:
    """The distinct hashed words of a query, under the current key and then
    under each retired one still listed (``term_keys``)."""
    distinct = list(dict.fromkeys(words(query)))[:MAX_QUERY_TERMS]
    return [hashed(key, word) for key in term_keys(organisation_id) for word in distinct]
