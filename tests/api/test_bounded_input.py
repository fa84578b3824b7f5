"""Input that would make the event loop work without bound: a compressed
body of many gzip members, and a backend's SSE line that never ends. Each is
refused in time linear in what was read, and an honest input still works."""

from __future__ import annotations

import asyncio
import gzip
import statistics
import time

import orjson
import pytest
import zstandard

from responses_api.backends.sse import MAX_LINE_BYTES, ChunkReader, UpstreamProtocolError
from responses_api.edge import encoding
from responses_api.edge.encoding import MAX_GZIP_MEMBERS, decode, decode_body
from responses_api.protocol.errors import ApiError

CAP = 16 * 1024 * 1024
BODY = orjson.dumps({"model": "sim-model", "input": "hello " * 2000})


def members(body: bytes, count: int) -> bytes:
    step = -(-len(body) // count)
    return b"".join(gzip.compress(body[i : i + step]) for i in range(0, len(body), step))


def test_a_body_of_several_gzip_members_is_decoded_whole():
    for count in (2, 7, MAX_GZIP_MEMBERS):
        assert decode_body(members(BODY, count), b"gzip", cap=CAP) == BODY


def test_a_member_past_the_cap_is_a_400_naming_it():
    with pytest.raises(ApiError) as refused:
        decode_body(members(BODY, MAX_GZIP_MEMBERS + 1), b"gzip", cap=CAP)
    assert refused.value.status == 400
    assert f"more than {MAX_GZIP_MEMBERS} members" in refused.value.message


def test_two_hundred_thousand_gzip_members_are_refused_at_once():
    data = gzip.compress(b"x") * 200_000  # 4.2 MB: 9.7 s of event loop before
    started = time.perf_counter()
    with pytest.raises(ApiError) as refused:
        decode_body(data, b"gzip", cap=CAP)
    assert refused.value.status == 400
    assert time.perf_counter() - started < 0.1


def test_a_large_single_member_body_is_decoded_in_linear_time():
    """Fed in windows, a member's input is copied at most once per window."""
    body = orjson.dumps({"model": "m", "input": [str(i) for i in range(1_000_000)]})
    data = gzip.compress(body, compresslevel=1)
    started = time.perf_counter()
    assert decode_body(data, b"gzip", cap=CAP) == body
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("name", "compress"), [(b"gzip", gzip.compress), (b"zstd", zstandard.compress)]
)
def test_a_truncated_or_trailing_garbage_body_is_still_corrupt(name, compress):
    data = compress(BODY)
    for broken in (data[:-5], data + b"garbage!"):
        with pytest.raises(ApiError) as refused:
            decode_body(broken, name, cap=CAP)
        assert refused.value.status == 400


def _threads_used(monkeypatch) -> list[int]:
    used = []
    to_thread = asyncio.to_thread

    async def spy(function, /, *args, **kwargs):
        used.append(1)
        return await to_thread(function, *args, **kwargs)

    monkeypatch.setattr(encoding.asyncio, "to_thread", spy)
    return used


def test_a_small_body_is_decoded_on_the_loop(monkeypatch):
    used = _threads_used(monkeypatch)
    for name, data in ((b"gzip", gzip.compress(BODY)), (b"zstd", zstandard.compress(BODY))):
        assert asyncio.run(decode(data, name, cap=CAP)) == BODY
    assert asyncio.run(decode(BODY, None, cap=CAP)) == BODY
    assert asyncio.run(decode(BODY * 100, b"identity", cap=CAP)) == BODY * 100
    assert used == []


def test_a_big_body_or_one_that_decodes_to_a_lot_is_decoded_in_a_thread(monkeypatch):
    used = _threads_used(monkeypatch)
    big = orjson.dumps({"model": "m", "input": [str(i) for i in range(200_000)]})
    assert len(gzip.compress(big)) > encoding.INLINE_BYTES
    assert asyncio.run(decode(gzip.compress(big), b"gzip", cap=CAP)) == big
    zeros = b" " * (4 * encoding.INLINE_OUTPUT)  # a few kB compressed
    assert len(gzip.compress(zeros)) < encoding.INLINE_BYTES
    assert asyncio.run(decode(gzip.compress(zeros), b"gzip", cap=CAP)) == zeros
    assert len(used) == 2


def test_a_bomb_decoded_in_a_thread_leaves_the_loop_free():
    bomb = gzip.compress(b"\0" * (CAP + 1))  # 16 kB that decode to over the cap
    rounds = 5
    worst = []  # per decode, the longest the loop waited to wake

    async def main() -> None:
        gaps: list[float] = []

        async def tick() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.001)  # what is measured: how late this wakes
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        for _ in range(rounds):
            await asyncio.sleep(0.01)  # a few ticks before, to compare with
            gaps.clear()
            with pytest.raises(ApiError) as refused:
                await decode(bomb, b"gzip", cap=CAP)
            assert refused.value.status == 413
            await asyncio.sleep(0.01)  # the ticker measures the gap it saw
            worst.append(max(gaps))
        ticker.cancel()

    asyncio.run(main())
    # Decoding it on the loop would hold the loop as long as the decoding
    # takes (~50 ms on an idle machine), in every round; measured here, as
    # loaded as the ticker was, so that a busy machine cannot fail the test.
    # Medians: a process descheduled once by a busy machine is one round's
    # long gap, where decoding on the loop would be every round's.
    inline = []
    for _ in range(rounds):
        started = time.perf_counter()
        with pytest.raises(ApiError):
            decode_body(bomb, b"gzip", cap=CAP)
        inline.append(time.perf_counter() - started)
    gap, cost = statistics.median(worst), statistics.median(inline)
    assert gap < max(0.02, cost / 2), (worst, inline)


def chunk_line(content: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": content}}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def test_lines_cut_anywhere_are_read_whole():
    stream = b"".join(chunk_line(f"token {i} ") for i in range(300)) + b"data: [DONE]\n\n"
    for size in (1, 7, 100, 4096, 70_000):
        reader = ChunkReader()
        chunks = []
        for i in range(0, len(stream), size):
            chunks += reader.feed(stream[i : i + size])
        assert [c["choices"][0]["delta"]["content"] for c in chunks] == [
            f"token {i} " for i in range(300)
        ]
        assert reader.done


def test_a_long_line_under_the_limit_in_small_pieces_is_read():
    line = chunk_line("y" * (MAX_LINE_BYTES - 100))
    reader = ChunkReader()
    chunks = []
    for i in range(0, len(line), 1000):
        chunks += reader.feed(line[i : i + 1000])
    assert chunks[0]["choices"][0]["delta"]["content"] == "y" * (MAX_LINE_BYTES - 100)


@pytest.mark.parametrize("piece", [1000, 65536, 2 * MAX_LINE_BYTES])
def test_a_line_over_a_megabyte_is_a_protocol_error(piece):
    line = chunk_line("z" * MAX_LINE_BYTES)
    reader = ChunkReader()
    with pytest.raises(UpstreamProtocolError, match="over 1 MB"):
        for i in range(0, len(line), piece):
            reader.feed(line[i : i + piece])


def test_a_96_mib_line_in_pieces_is_refused_after_a_megabyte():
    """Joined at every read, a 96 MiB line took 8.3 s."""
    reader = ChunkReader()
    piece = b"x" * 65536
    fed = 0
    started = time.perf_counter()
    with pytest.raises(UpstreamProtocolError):
        reader.feed(b'data: {"choices": "')
        for _ in range(96 * 16):
            reader.feed(piece)
            fed += len(piece)
    assert fed <= MAX_LINE_BYTES
    assert time.perf_counter() - started < 0.1


def test_many_one_byte_reads_of_a_line_cost_linear_time():
    line = chunk_line("w" * 300_000)
    reader = ChunkReader()
    started = time.perf_counter()
    chunks = []
    for i in range(len(line)):
        chunks += reader.feed(line[i : i + 1])
    assert len(chunks) == 1
    assert time.perf_counter() - started < 2.0
