"""Which backend probably holds a prompt's prefix in its cache (the
approximate mode of README, "Routing").

A backend's prefix cache keeps the prompts it processed lately, in blocks of
tokens; a request whose prompt starts with one of them skips that part of
the prefill. Switchyard cannot see those caches, so it keeps its own record
of what each backend was sent: the rendered prompt (the tools and the chat
messages, as serialised for the backend) cut into blocks of
``BLOCK_CHARS`` characters (about 64 tokens), each block hashed together
with every block before it. A prompt's blocks found in a backend's record,
counted from the first until one is missing, are the prefix that backend is
expected to reuse.

The record is per organisation and backend: the hashes start from the
organisation's id, and its prompts are cached under a salt of its own
(``store.seal.cache_salt``), so another organisation's identical prompt
neither matches nor would be served from the cache. Each record is bounded
(``SWITCHYARD_ROUTING_PREFIX_BLOCKS`` hashes, least recently sent dropped
first) and ages out after ``SWITCHYARD_ROUTING_PREFIX_TTL_SECONDS``: in the
process for the embedded default, in a Redis sorted set per record (score:
when the block was last sent) when ``REDIS_URL`` is set, read in the round
trip that reads the backends' loads (``routing_state.RedisState.observe``)
and written with the request's usage row (``Release``).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.conf import settings

BLOCK_CHARS = 256
CHARS_PER_TOKEN = 4
# A prompt's first blocks only: past about 128k tokens the rest is not
# compared (the lookup would grow with the prompt, for a score already won).
MAX_BLOCKS = 2048


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    """A prompt's chained block hashes, of one organisation."""

    organisation_id: int
    hashes: tuple[str, ...]
    # The chat body and the organisation's cache salt, for the backends in
    # precise mode, which look the prompt up by its tokens (``prompt_tokens``).
    body: Mapping[str, Any] = field(default_factory=dict, compare=False)
    salt: str | None = None

    @staticmethod
    def tokens(blocks: int) -> int:
        """About how many tokens ``blocks`` blocks are."""
        return blocks * BLOCK_CHARS // CHARS_PER_TOKEN


def prompt_blocks(
    organisation_id: int, body: Mapping[str, Any], salt: str | None = None
) -> PromptBlocks:
    """The blocks of a chat body's prompt. Only whole blocks: the last,
    partial one changes as the conversation grows."""
    text = orjson.dumps(body.get("tools") or ()) + orjson.dumps(body.get("messages") or ())
    digest = hashlib.blake2b(b"org:%d" % organisation_id, digest_size=8).digest()
    hashes: list[str] = []
    end = min(len(text) // BLOCK_CHARS, MAX_BLOCKS) * BLOCK_CHARS
    for start in range(0, end, BLOCK_CHARS):
        digest = hashlib.blake2b(digest + text[start : start + BLOCK_CHARS], digest_size=8).digest()
        hashes.append(digest.hex())
    return PromptBlocks(organisation_id, tuple(hashes), body, salt)


def leading(found: Sequence[bool]) -> int:
    """How many of the blocks, from the first, were found."""
    count = 0
    for hit in found:
        if not hit:
            break
        count += 1
    return count


def index_key(organisation_id: int, backend_id: str) -> str:
    return f"sy:prefix:{organisation_id}:{backend_id}"


def lookup_command(blocks: PromptBlocks, backend_id: str) -> tuple[Any, ...]:
    """The Redis command reading when each block was last sent to the backend."""
    return ("ZMSCORE", index_key(blocks.organisation_id, backend_id), *blocks.hashes)


def found_in_redis(scores: Sequence[Any] | None, now: float) -> int:
    """The leading blocks of a ``ZMSCORE`` answer sent within the TTL."""
    oldest = now - settings.SWITCHYARD_ROUTING["prefix_ttl_seconds"]
    return leading([s is not None and float(s) >= oldest for s in scores or ()])


def record_commands(blocks: PromptBlocks, backend_id: str, now: float) -> list[tuple[Any, ...]]:
    """The Redis commands recording that the backend was sent these blocks,
    keeping its record within its bound."""
    if not blocks.hashes:
        return []
    routing = settings.SWITCHYARD_ROUTING
    key = index_key(blocks.organisation_id, backend_id)
    members: list[Any] = []
    for at, digest in enumerate(blocks.hashes):
        # A later block a microsecond older: a record past its bound drops
        # prompts' tails before their heads, which more prompts share.
        members += [now - at * 1e-6, digest]
    return [
        ("ZADD", key, *members),
        ("ZREMRANGEBYRANK", key, 0, -(routing["prefix_blocks"] + 1)),
        ("EXPIRE", key, int(routing["prefix_ttl_seconds"])),
    ]


class LocalPrefixIndex:
    """The records of one process (the embedded default)."""

    def __init__(self) -> None:
        self._records: dict[tuple[int, str], OrderedDict[str, float]] = {}

    def found(self, blocks: PromptBlocks, backend_id: str) -> int:
        record = self._records.get((blocks.organisation_id, backend_id))
        if not record:
            return 0
        oldest = time.time() - settings.SWITCHYARD_ROUTING["prefix_ttl_seconds"]
        return leading([record.get(h, 0.0) >= oldest for h in blocks.hashes])

    def record(self, blocks: PromptBlocks, backend_id: str) -> None:
        if not blocks.hashes:
            return
        record = self._records.setdefault((blocks.organisation_id, backend_id), OrderedDict())
        now = time.time()
        # Tail first: past the bound, a prompt's tail goes before its head,
        # which more prompts share.
        for digest in reversed(blocks.hashes):
            record[digest] = now
            record.move_to_end(digest)
        bound = settings.SWITCHYARD_ROUTING["prefix_blocks"]
        while len(record) > bound:
            record.popitem(last=False)

    def forget_backend(self, backend_id: str) -> None:
        for key in [k for k in self._records if k[1] == backend_id]:
            del self._records[key]
