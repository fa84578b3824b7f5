"""A small asyncio HTTP/1.1 load generator (keep-alive, chunked, SSE-aware).

One connection per concurrent worker. For every response it records the
latency, the time of the first text delta and the arrival time of every text
delta (events that arrive in one network read share a timestamp), which is
all the benchmark needs; it parses nothing else, so it costs far less per
request than the servers it measures.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

# A chat chunk whose delta carries text, or a Responses text-delta event.
CHAT_DELTA = re.compile(rb'"delta":\{"content":"[^"]')
RESPONSES_DELTA = re.compile(rb'"type": ?"response\.output_text\.delta"')


@dataclass(slots=True)
class Result:
    status: int
    latency: float
    first_delta: float | None
    deltas: int
    gaps: list[float] = field(default_factory=list)
    gap_times: list[float] = field(default_factory=list)  # perf_counter at each gap's end
    error: str = ""
    started: float = 0.0


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 22
        )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(
        self, path: str, body: bytes, headers: bytes, marker: re.Pattern[bytes], keep_gaps: bool
    ) -> Result:
        if self.writer is None:
            await self._open()
        reader, writer = self.reader, self.writer
        assert reader is not None and writer is not None
        started = time.perf_counter()
        writer.write(
            b"POST %s HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n%s\r\n%s"
            % (path.encode(), self.host.encode(), self.port, len(body), headers, body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lowered = head.lower()
        first: float | None = None
        deltas = 0
        gaps: list[float] = []
        gap_times: list[float] = []
        last: float | None = None
        if b"transfer-encoding: chunked" in lowered:
            pending = b""  # an SSE event may span HTTP chunks
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                data = await reader.readexactly(size + 2)
                if size == 0:
                    break
                pending += data[:-2]
                cut = pending.rfind(b"\n\n")
                if cut < 0:
                    continue
                complete, pending = pending[: cut + 2], pending[cut + 2 :]
                count = len(marker.findall(complete))
                if count:
                    now = time.perf_counter()
                    if first is None:
                        first = now
                    if keep_gaps:
                        if last is not None:
                            gaps.append(now - last)
                            gap_times.append(now)
                        gaps.extend([0.0] * (count - 1))
                        gap_times.extend([now] * (count - 1))
                    last = now
                    deltas += count
        else:
            match = re.search(rb"content-length: *(\d+)", lowered)
            length = int(match.group(1)) if match else 0
            await reader.readexactly(length)
        end = time.perf_counter()
        if b"connection: close" in lowered:
            self.close()
        return Result(
            status=status,
            latency=end - started,
            first_delta=None if first is None else first - started,
            deltas=deltas,
            gaps=gaps,
            gap_times=gap_times,
            started=started,
        )


async def run_load(
    *,
    host: str,
    port: int,
    path: str,
    body: bytes,
    headers: bytes,
    marker: re.Pattern[bytes],
    concurrency: int,
    requests: int,
    keep_gaps: bool = False,
    ramp: float = 0.0,
    timeout: float = 600.0,  # noqa: ASYNC109 (one deadline for the whole run)
) -> list[Result]:
    """``requests`` requests over ``concurrency`` keep-alive connections;
    those not done within ``timeout`` seconds are failed results."""
    results: list[Result] = []
    remaining = requests

    workers = min(concurrency, requests)

    async def worker(index: int) -> None:
        nonlocal remaining
        if ramp:
            # Spread the connects: a burst of a thousand overflows listen backlogs.
            await asyncio.sleep(ramp * index / workers)
        connection = Connection(host, port)
        try:
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                try:
                    result = await connection.request(path, body, headers, marker, keep_gaps)
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    connection.close()
                    result = Result(0, time.perf_counter() - started, None, 0, error=repr(exc))
                results.append(result)
        finally:
            connection.close()

    try:
        await asyncio.wait_for(asyncio.gather(*(worker(i) for i in range(workers))), timeout)
    except TimeoutError:
        # A server too slow for the run's bound: what did not finish counts
        # as failed requests instead of ending the benchmark.
        results.extend(
            Result(0, timeout, None, 0, error="timed out") for _ in range(requests - len(results))
        )
    return results
