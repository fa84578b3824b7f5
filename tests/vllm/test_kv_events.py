"""Precise mode's parts without a vLLM: decoding KV-cache event batches
built by hand as vLLM encodes them (msgspec structs as msgpack maps tagged
with ``type``), the index they fill, a real ZMQ publisher, and a prompt's
token blocks from the test model's tokenizer."""

from __future__ import annotations

import time
from types import SimpleNamespace

import msgpack
import pytest
import zmq

from responses_api.backends import kv_events
from responses_api.backends.kv_events import MAX_PAYLOAD, BlockIndex, chain
from responses_api.backends.kv_subscriber import Subscriber, index_for, stop_all
from responses_api.backends.prefix_index import prompt_blocks
from responses_api.backends.prompt_tokens import block_keys, held_by, prompt_token_ids
from responses_api.backends.scoring import NO_SIGNALS, Held, Observed, rank, reason
from tests.conftest import free_port
from tests.real_servers import shared_model

SIZE = 4
SALT = "salt-of-acme"


def stored(hashes, parent, tokens, *, extra_keys=None, size=SIZE, **more) -> dict:
    event = {
        "type": "BlockStored",
        "block_hashes": hashes,
        "parent_block_hash": parent,
        "token_ids": tokens,
        "block_size": size,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
        **more,
    }
    if extra_keys is not None:
        event["extra_keys"] = extra_keys
    return event


def batch(*events) -> bytes:
    return msgpack.packb({"ts": time.time(), "events": list(events), "data_parallel_rank": 0})


def frames(seq: int, payload: bytes) -> list[bytes]:
    return [b"kv", seq.to_bytes(8, "big", signed=True), payload]


TOKENS = list(range(1, 13))  # three blocks of four


def salted_chain(index: BlockIndex, salt: str | None = SALT) -> None:
    extra = [[salt] if salt else None, None, None]
    # vLLM's hashes differ with the salt too.
    hashes = [f"{salt}h{i}".encode() for i in (1, 2, 3)]
    index.apply(batch(stored(hashes, None, TOKENS, extra_keys=extra)))


def test_stored_blocks_are_held_under_the_keys_a_prompt_gives():
    index = BlockIndex(100)
    salted_chain(index)
    assert index.holds(block_keys(TOKENS, SIZE, SALT)) == 3
    assert index.holds(block_keys(TOKENS[:8] + [99, 99, 99, 99], SIZE, SALT)) == 2
    assert index.block_size == SIZE and len(index) == 3


def test_another_salt_or_none_matches_nothing():
    index = BlockIndex(100)
    salted_chain(index)
    assert index.holds(block_keys(TOKENS, SIZE, "salt-of-globex")) == 0
    assert index.holds(block_keys(TOKENS, SIZE, None)) == 0
    salted_chain(index, salt=None)
    assert index.holds(block_keys(TOKENS, SIZE, None)) == 3
    assert index.holds(block_keys(TOKENS, SIZE, "salt-of-globex")) == 0


def test_a_chain_continues_from_its_parent_and_removals_cut_it():
    index = BlockIndex(100)
    salted_chain(index)
    index.apply(batch(stored([7], f"{SALT}h3".encode(), [13, 14, 15, 16])))
    assert index.holds(block_keys([*TOKENS, 13, 14, 15, 16], SIZE, SALT)) == 4
    removed = [f"{SALT}h2".encode()]
    index.apply(batch({"type": "BlockRemoved", "block_hashes": removed, "medium": "GPU"}))
    assert index.holds(block_keys(TOKENS, SIZE, SALT)) == 1
    index.apply(batch({"type": "AllBlocksCleared"}))
    assert index.holds(block_keys(TOKENS, SIZE, SALT)) == 0 and len(index) == 0


def test_an_unknown_parent_is_an_orphan_and_holds_nothing():
    index = BlockIndex(100)
    index.apply(batch(stored([b"x"], b"never-seen", [1, 2, 3, 4])))
    assert len(index) == 0 and index.counts["orphans"] == 1


def test_array_encoded_events_decode_too():
    index = BlockIndex(100)
    event = ["BlockStored", [b"h1"], None, [1, 2, 3, 4], SIZE, None, "GPU", None, [[SALT]]]
    index.apply(msgpack.packb([time.time(), [event], 0]))
    assert index.holds(block_keys([1, 2, 3, 4], SIZE, SALT)) == 1


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xc1\xc1\xc1",  # never-used msgpack byte
        b"not msgpack at all",
        msgpack.packb([1, 2, 3]),
        msgpack.packb({"ts": 1.0, "events": "nope"}),
        msgpack.packb({"ts": 1.0, "events": [42]}),
        msgpack.packb({"events": [msgpack.ExtType(1, b"x")]}),
    ],
)
def test_malformed_batches_are_dropped_and_counted(payload):
    index = BlockIndex(100)
    salted_chain(index)
    index.apply(payload)
    assert index.counts["malformed"] + index.counts["malformed_events"] >= 1
    assert index.holds(block_keys(TOKENS, SIZE, SALT)) == 3


@pytest.mark.parametrize(
    "event",
    [
        stored([b"a"], None, [1, 2, 3]),  # tokens not block_size per block
        stored([b"a"], None, [1, 2, 3, 4], size=0),
        stored([b"a"], None, [1, 2, 3, 4], size=10**9),
        stored([], None, []),
        stored([b"a" * 1000], None, [1, 2, 3, 4]),  # hash too long
        stored([1.5], None, [1, 2, 3, 4]),
        stored([b"a"], None, ["a", "b", "c", "d"]),
        stored([b"a"], None, [-1, 2, 3, 4]),
        stored([b"a", b"b"], None, list(range(8)), extra_keys=[None]),
        {"type": "BlockRemoved", "block_hashes": "abc"},
        {"type": "Unknown"},
    ],
)
def test_malformed_events_are_skipped_and_the_rest_applied(event):
    index = BlockIndex(100)
    index.apply(batch(event, stored([b"ok"], None, [5, 6, 7, 8])))
    assert index.counts["malformed_events"] == 1 and index.counts["events"] == 1
    assert index.holds(block_keys([5, 6, 7, 8], SIZE, None)) == 1


def test_huge_payloads_and_lists_are_refused():
    index = BlockIndex(100)
    index.apply(b"\x00" * (MAX_PAYLOAD + 1))
    many = [stored([i], None, [1, 2, 3, 4]) for i in range(kv_events.MAX_EVENTS + 1)]
    index.apply(batch(*many))
    blocks = stored(list(range(kv_events.MAX_BLOCKS_PER_EVENT + 1)), None, [])
    index.apply(batch(blocks))
    assert index.counts["malformed"] == 2 and index.counts["malformed_events"] == 1
    assert len(index) == 0


def test_lora_blocks_are_not_counted():
    index = BlockIndex(100)
    index.apply(batch(stored([b"a"], None, [1, 2, 3, 4], lora_name="adapter")))
    assert len(index) == 0 and index.counts["skipped_lora"] == 1


def test_the_index_keeps_its_bound_oldest_first():
    index = BlockIndex(2)
    salted_chain(index)
    assert len(index) == 2
    # The chain's head went first: its prompt no longer matches from the start.
    assert index.holds(block_keys(TOKENS, SIZE, SALT)) == 0


def test_a_sequence_gap_or_restart_clears_the_index():
    index = BlockIndex(100)
    event = stored([b"h1"], None, [1, 2, 3, 4])
    index.receive(frames(5, batch(event)))
    index.receive(frames(6, batch(stored([b"h2"], b"h1", [5, 6, 7, 8]))))
    assert len(index) == 2 and index.counts["gaps"] == 0
    index.receive(frames(8, batch(stored([b"h3"], None, [9, 9, 9, 9]))))  # 7 lost
    assert index.counts["gaps"] == 1 and len(index) == 1
    index.receive(frames(0, batch(event)))  # the engine restarted
    assert index.counts["gaps"] == 2 and len(index) == 1
    index.receive([b"kv", b"short", b""])
    index.receive([b"only one frame"])
    assert index.counts["malformed"] == 2


def test_chain_keys_differ_by_parent_tokens_and_extra():
    root = chain(b"", [1, 2], None)
    assert root != chain(b"", [1, 2], ["s"]) != chain(b"x", [1, 2], ["s"])
    assert root == chain(b"", [1, 2], [])
    assert chain(b"", [1, 2], [b"\xff"]) is None  # not comparable, never matched


def test_a_subscriber_receives_a_real_publisher():
    port = free_port()
    context = zmq.Context.instance()
    publisher = context.socket(zmq.PUB)
    publisher.bind(f"tcp://127.0.0.1:{port}")
    subscriber = Subscriber(f"tcp://127.0.0.1:{port}", 100)
    subscriber.start()
    try:
        deadline = time.monotonic() + 10
        seq = 0
        # A SUB socket misses what is published before its subscription
        # reaches the publisher: publish until something arrives.
        while not len(subscriber.index) and time.monotonic() < deadline:
            publisher.send_multipart(frames(seq, batch(stored([b"h1"], None, [1, 2, 3, 4]))))
            seq += 1
            time.sleep(0.05)
        assert len(subscriber.index) == 1
        publisher.send_multipart([b"kv", b"garbage"])
        publisher.send_multipart(frames(seq, b"\xc1"))
        deadline = time.monotonic() + 5
        while subscriber.index.counts["malformed"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert subscriber.index.counts["malformed"] == 2
        assert subscriber.thread.is_alive()
    finally:
        subscriber.stop()
        subscriber.thread.join(5)
        publisher.close(linger=0)


def test_the_test_models_prompt_renders_and_tokenizes():
    model = shared_model("SWITCHYARD_TEST_VLLM_MODEL", "stories260K-hf", lambda p: p.is_dir())
    if not (model / "tokenizer.json").is_file():
        pytest.skip(f"the test model is not at {model}")
    body = {"messages": [{"role": "user", "content": "Once upon a time " * 40}]}
    ids = prompt_token_ids(str(model), body)
    assert ids and ids[0] == 1  # the template's BOS, <s>
    keys = block_keys(ids, 128, SALT)
    assert len(keys) == len(ids) // 128 >= 1
    assert prompt_token_ids("/nonexistent", body) is None


def test_a_precise_backend_is_scored_by_the_blocks_its_events_report(tmp_path):
    model = shared_model("SWITCHYARD_TEST_VLLM_MODEL", "stories260K-hf", lambda p: p.is_dir())
    if not (model / "tokenizer.json").is_file():
        pytest.skip(f"the test model is not at {model}")
    endpoint = f"ipc://{tmp_path}/events"
    publisher = zmq.Context.instance().socket(zmq.PUB)
    publisher.bind(endpoint)
    body = {"messages": [{"role": "user", "content": "Once upon a time there was a cat. " * 30}]}
    ids = prompt_token_ids(str(model), body)
    whole = len(ids) // 128
    assert whole >= 2

    def backend(backend_id: str, events: str = ""):
        return SimpleNamespace(
            id=backend_id,
            kv_events_endpoint=events,
            tokenizer_path=str(model) if events else "",
            dialect="vllm",
            max_concurrency=0,
        )

    routes = [
        SimpleNamespace(backend=backend("plain")),
        SimpleNamespace(backend=backend("p", endpoint)),
    ]
    acme = prompt_blocks(1, body, "salt-1")
    try:
        index = index_for(endpoint)
        extra = [["salt-1"]] + [None] * (whole - 1)
        event = stored(list(range(whole)), None, ids[: whole * 128], size=128, extra_keys=extra)
        deadline, seq = time.monotonic() + 10, 0
        while not len(index) and time.monotonic() < deadline:
            publisher.send_multipart(frames(seq, batch(event)))
            seq += 1
            time.sleep(0.05)
        held = held_by(routes, acme)
        assert held == [None, Held(whole, whole, 128)]
        # Another organisation's identical prompt: none of it.
        assert held_by(routes, prompt_blocks(2, body, "salt-2"))[1] == Held(0, whole, 128)
        observed = Observed(counts=[0, 0], signals=[NO_SIGNALS] * 2, blocks=[0, 0], precise=held)
        ranking = rank(routes, observed, total_blocks=len(acme.hashes))
        assert ranking.order[0] == 1 and ranking.reuse[1] == 1.0
        assert reason(ranking, 1) == "prefix" and ranking.tokens[1] == whole * 128
    finally:
        stop_all()
        publisher.close(linger=0)


# A batch as vLLM 0.32.0's own encoder writes it (msgspec: the batch an
# array, its events maps): a salted block of two tokens, a removal of
# another hash, and a clear.
VLLM_BATCH = bytes.fromhex(
    "93cb3ff00000000000009389a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368"
    "657391c4206161616161616161616161616161616161616161616161616161616161616161b17061"
    "72656e745f626c6f636b5f68617368c0a9746f6b656e5f696473920102aa626c6f636b5f73697a65"
    "02a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b"
    "6579739191a473616c7483a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368"
    "65739105a66d656469756da347505581a474797065b0416c6c426c6f636b73436c6561726564c0"
)


def test_vllms_own_encoding_decodes():
    (stored_event, removed, cleared) = kv_events.decode(VLLM_BATCH)
    assert stored_event[0] == "BlockStored" and stored_event[1]["extra_keys"] == [["salt"]]
    assert removed == (
        "BlockRemoved",
        {"type": "BlockRemoved", "block_hashes": [5], "medium": "GPU"},
    )
    assert cleared[0] == "AllBlocksCleared"
    index = BlockIndex(100)
    index.apply(VLLM_BATCH)
    assert len(index) == 0 and index.counts["events"] == 3


def test_partial_blocks_are_not_keyed():
    index = BlockIndex(100)
    salted_chain(index)
    index.apply(batch(stored([b"p"], f"{SALT}h3".encode(), [13, 14], size=2)))
    assert index.counts["partial"] == 1 and index.block_size == SIZE and len(index) == 3
