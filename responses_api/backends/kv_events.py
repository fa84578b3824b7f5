"""The blocks a vLLM backend holds in its prefix cache, from the KV-cache
events it publishes (the precise mode of docs/operations/routing.md).

vLLM publishes, over ZMQ, msgpack-encoded batches (``KVEventBatch``) of
``BlockStored`` (blocks it filled: their hashes, their parent's hash, their
token ids, extra keys such as the request's ``cache_salt``),
``BlockRemoved`` (hashes it evicted) and ``AllBlocksCleared``. Its own block
hashes start from a per-process random seed unless the server is started
with ``PYTHONHASHSEED`` and a reproducible hash algorithm, so they cannot be
worked out from a prompt here: each block is keyed instead by the key of
its parent, its token ids and its extra keys (:func:`chain`), which a
prompt's tokens give the same way (``prompt_tokens``). vLLM mixes the salt
into the first block's hash and reports it in that block's extra keys, so
one organisation's blocks never carry another's key.

The events are untrusted input: a payload over ``MAX_PAYLOAD`` bytes, a
batch over ``MAX_EVENTS`` events, a block list over ``MAX_BLOCKS_PER_EVENT``
blocks or anything not of the documented shape is dropped and counted;
the index of an endpoint keeps at most its bound of blocks, oldest
stored dropped first. Pure: no I/O (``kv_subscriber`` receives the frames).
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

import msgpack
import orjson

MAX_PAYLOAD = 8 * 1024 * 1024
MAX_EVENTS = 65536
MAX_BLOCKS_PER_EVENT = 4096
MAX_BLOCK_SIZE = 4096
MAX_HASH_BYTES = 64
ROOT = b""

# Field order of the events when encoded as arrays (msgspec's array_like).
STORED_FIELDS = (
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
)
REMOVED_FIELDS = ("block_hashes", "medium")


class Malformed(ValueError):
    """A payload or event not of the documented shape."""


def chain(parent: bytes, tokens: Sequence[int], extra: Any) -> bytes | None:
    """A block's key: its parent's, its tokens and its extra keys. None when
    the extra keys hold what cannot be compared (a prompt sent by
    Switchyard never has them: images' hashes, LoRA names)."""
    try:
        extra_bytes = orjson.dumps(list(extra)) if extra else b""
        tokens_bytes = array("I", tokens).tobytes()
    except (TypeError, ValueError, OverflowError):
        return None
    digest = hashlib.blake2b(parent, digest_size=16)
    digest.update(len(tokens_bytes).to_bytes(4, "big") + tokens_bytes)
    digest.update(extra_bytes)
    return digest.digest()


def _hash(value: Any) -> bytes | int:
    if isinstance(value, bytes) and 0 < len(value) <= MAX_HASH_BYTES:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and -(2**127) <= value < 2**128:
        return value
    raise Malformed("block hash")


def _fields(event: Any, names: Sequence[str]) -> tuple[str, dict[str, Any]]:
    if isinstance(event, dict):
        kind = event.get("type")
        return str(kind), event
    if isinstance(event, list) and event and isinstance(event[0], str):
        return event[0], dict(zip(names, event[1:], strict=False))
    raise Malformed("event")


def decode(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    """A batch's events as (kind, fields); raises ``Malformed``."""
    if len(payload) > MAX_PAYLOAD:
        raise Malformed("payload too large")
    try:
        batch = msgpack.unpackb(
            payload,
            raw=False,
            strict_map_key=False,
            max_array_len=MAX_BLOCK_SIZE * MAX_BLOCKS_PER_EVENT,
            max_map_len=64,
            max_ext_len=0,
        )
    except (ValueError, TypeError) as error:
        # msgpack's own errors are ValueErrors; an unhashable map key a TypeError.
        raise Malformed("msgpack") from error
    events = batch.get("events") if isinstance(batch, dict) else None
    if events is None and isinstance(batch, list) and len(batch) >= 2:
        events = batch[1]
    if not isinstance(events, list) or len(events) > MAX_EVENTS:
        raise Malformed("batch")
    decoded = []
    for event in events:
        kind, fields = _fields(event, STORED_FIELDS)
        if kind == "BlockRemoved" and isinstance(event, list):
            kind, fields = _fields(event, REMOVED_FIELDS)
        decoded.append((kind, fields))
    return decoded


class BlockIndex:
    """The blocks one endpoint (one vLLM engine) reported holding, by key;
    safe to read from the event loop while its subscriber thread writes."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._lock = threading.Lock()
        # vLLM's hash of each held block → its key, oldest stored first.
        self._keys: OrderedDict[bytes | int, bytes] = OrderedDict()
        self._held: Counter[bytes] = Counter()
        self.block_size = 0
        self.counts: Counter[str] = Counter()
        self.last_seq: int | None = None

    def __len__(self) -> int:
        return len(self._keys)

    def holds(self, keys: Sequence[bytes]) -> int:
        """How many of the keys, from the first, the endpoint holds."""
        with self._lock:
            count = 0
            for key in keys:
                if not self._held[key]:
                    break
                count += 1
            return count

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()
            self._held.clear()

    def receive(self, frames: Sequence[bytes]) -> None:
        """One message of the publisher: topic, sequence number, payload. A
        sequence number that does not follow the last one (a lost batch, or
        a restarted engine starting again from 0) clears the index: what
        it holds can no longer be told from what it would have held."""
        if len(frames) != 3 or len(frames[1]) != 8:
            self.counts["malformed"] += 1
            return
        seq = int.from_bytes(frames[1], "big", signed=True)
        if self.last_seq is not None and seq != self.last_seq + 1:
            self.counts["gaps"] += 1
            self.clear()
        self.last_seq = seq
        self.apply(frames[2])

    def apply(self, payload: bytes) -> None:
        """Apply one batch; a malformed one is dropped whole and counted."""
        try:
            events = decode(payload)
        except Malformed:
            self.counts["malformed"] += 1
            return
        self.counts["batches"] += 1
        for kind, fields in events:
            try:
                if kind == "BlockStored":
                    self._stored(fields)
                elif kind == "BlockRemoved":
                    self._removed(fields)
                elif kind == "AllBlocksCleared":
                    self.clear()
                else:
                    raise Malformed(kind)
            except (Malformed, TypeError, ValueError):
                self.counts["malformed_events"] += 1
            else:
                self.counts["events"] += 1

    def _stored(self, fields: dict[str, Any]) -> None:
        hashes = fields.get("block_hashes")
        tokens = fields.get("token_ids")
        size = fields.get("block_size")
        extras = fields.get("extra_keys")
        if not (isinstance(hashes, list) and 0 < len(hashes) <= MAX_BLOCKS_PER_EVENT):
            raise Malformed("block_hashes")
        if not (isinstance(size, int) and 0 < size <= MAX_BLOCK_SIZE):
            raise Malformed("block_size")
        if not isinstance(tokens, list) or len(tokens) != size * len(hashes):
            raise Malformed("token_ids")
        if not all(type(t) is int and 0 <= t < 2**32 for t in tokens):
            raise Malformed("token_ids")
        if extras is not None and not (isinstance(extras, list) and len(extras) == len(hashes)):
            raise Malformed("extra_keys")
        if fields.get("lora_name") or fields.get("lora_id"):
            self.counts["skipped_lora"] += 1
            return
        if size < self.block_size:
            # A partial block (hybrid models' partial prefix entries): no
            # prompt is cut into blocks of its size.
            self.counts["partial"] += len(hashes)
            return
        hashes = [_hash(h) for h in hashes]
        raw_parent = fields.get("parent_block_hash")
        with self._lock:
            if raw_parent is None:
                parent: bytes | None = ROOT
            else:
                parent = self._keys.get(_hash(raw_parent))
            if parent is None:
                # Its parent was never seen (stored before the subscription,
                # or lost): its chain cannot be matched from a prompt's start.
                self.counts["orphans"] += len(hashes)
                return
            self.block_size = max(self.block_size, size)
            for i, vllm_hash in enumerate(hashes):
                extra = extras[i] if extras else None
                key = chain(parent, tokens[i * size : (i + 1) * size], extra)
                if key is None:
                    self.counts["uncomparable"] += len(hashes) - i
                    return
                before = self._keys.get(vllm_hash)
                if before != key:
                    if before is not None:
                        self._drop(before)
                    self._held[key] += 1
                self._keys[vllm_hash] = key
                self._keys.move_to_end(vllm_hash)
                parent = key
            while len(self._keys) > self.bound:
                _, old = self._keys.popitem(last=False)
                self._drop(old)

    def _removed(self, fields: dict[str, Any]) -> None:
        hashes = fields.get("block_hashes")
        if not (isinstance(hashes, list) and len(hashes) <= MAX_BLOCKS_PER_EVENT):
            raise Malformed("block_hashes")
        with self._lock:
            for raw in hashes:
                key = self._keys.pop(_hash(raw), None)
                if key is not None:
                    self._drop(key)

    def _drop(self, key: bytes) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]
