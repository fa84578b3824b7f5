"""WebSocket mode against Server-Sent Events, in the same run (docs/api/websocket.md):
the gateway's CPU per turn, a turn being one streamed
response to the same request.

Over SSE each turn is a ``POST /v1/responses`` on a kept-alive connection
(``loadgen``, as every other scenario); over WebSocket it is one
``response.create`` frame on a socket opened once per client, its events
read frame by frame until ``response.completed``. The same number of turns
runs each way at the same concurrency, back to back, and the gateway's CPU
(utime + stime of its processes) is read around each. WebSocket runs twice:
without compression, as the SDK connects by default, and with
permessage-deflate, which Codex offers.

A second comparison is a conversation: each turn continues the previous
response. Over SSE a client of an organisation that stores nothing sends the
whole conversation again; over WebSocket it names the previous response and
sends only the new message (the socket keeps the chain).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable

from loadgen import RESPONSES_DELTA, run_load
from websockets.asyncio.client import connect

DONE = ('{"type":"response.completed"', '{"type":"response.failed"', '{"type":"error"')


def _body(tokens: int) -> dict:
    return {"model": "sim-model", "input": f"[[tokens:{tokens}]] Tell me about foxes."}


async def _sse(port: int, key: str, tokens: int, turns: int, concurrency: int) -> int:
    results = await run_load(
        host="127.0.0.1",
        port=port,
        path="/v1/responses",
        body=json.dumps({**_body(tokens), "stream": True}).encode(),
        headers=f"authorization: Bearer {key}\r\n".encode(),
        marker=RESPONSES_DELTA,
        concurrency=concurrency,
        requests=turns,
    )
    return sum(r.status == 200 for r in results)


async def _socket_turns(
    port: int, key: str, frames: Callable[[str | None], str], turns: int, compression: str | None
) -> int:
    done = 0
    async with connect(
        f"ws://127.0.0.1:{port}/v1/responses",
        additional_headers={"authorization": f"Bearer {key}"},
        compression=compression,
        max_size=None,
    ) as socket:
        previous = None
        for _ in range(turns):
            await socket.send(frames(previous))
            while True:
                message = await socket.recv()
                assert isinstance(message, str)
                if message.startswith(DONE):
                    break
            if message.startswith(DONE[0]):
                done += 1
                previous = json.loads(message)["response"]["id"]
    return done


async def _ws(
    port: int,
    key: str,
    frames: Callable[[str | None], str],
    turns: int,
    concurrency: int,
    compression: str | None,
) -> int:
    share = [turns // concurrency + (i < turns % concurrency) for i in range(concurrency)]
    counts = await asyncio.gather(
        *(_socket_turns(port, key, frames, n, compression) for n in share if n)
    )
    return sum(counts)


async def _conversation_sse(port: int, key: str, tokens: int, turns: int) -> int:
    """One client's conversation over SSE: each turn resends everything."""
    import httpx

    done = 0
    history: list[dict] = []
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}/v1", headers={"authorization": f"Bearer {key}"}
    ) as client:
        for turn in range(turns):
            history.append({"role": "user", "content": f"[[tokens:{tokens}]] Turn {turn}."})
            output = []
            async with client.stream(
                "POST", "/responses", json={"model": "sim-model", "input": history, "stream": True}
            ) as answer:
                async for line in answer.aiter_lines():
                    if line.startswith('data: {"type":"response.completed"'):
                        output = json.loads(line[6:])["response"]["output"]
                        done += 1
            history.extend(output)
    return done


def _conversation_frames(tokens: int) -> Callable[[str | None], str]:
    count = 0

    def frame(previous: str | None) -> str:
        nonlocal count
        count += 1
        message = {"role": "user", "content": f"[[tokens:{tokens}]] Turn {count}."}
        body = {"type": "response.create", "model": "sim-model", "input": [message]}
        if previous is not None:
            body["previous_response_id"] = previous
        return json.dumps(body)

    return frame


async def compare(
    *,
    port: int,
    key: str,
    cpu: Callable[[], float],
    turns: int,
    concurrency: int,
    tokens: int,
    rounds: int = 3,
) -> dict:
    """Gateway CPU per turn (ms) and turns per second, each way. The ways
    take turns, ``rounds`` times, so that a machine whose speed drifts
    during the run weighs on each alike."""
    same = json.dumps({"type": "response.create", **_body(tokens)})
    share = max(turns // rounds, concurrency)
    talk = max(min(turns, 40) // rounds, 1)
    runs: dict[str, Callable[[], Awaitable[int]]] = {
        "sse": lambda: _sse(port, key, tokens, share, concurrency),
        "websocket": lambda: _ws(port, key, lambda _: same, share, concurrency, None),
        "websocket_deflate": lambda: _ws(port, key, lambda _: same, share, concurrency, "deflate"),
        "conversation_sse": lambda: _conversation_sse(port, key, tokens, talk),
        "conversation_websocket": lambda: _ws(
            port, key, _conversation_frames(tokens), talk, 1, None
        ),
    }
    totals = {name: [0, 0.0, 0.0] for name in runs}  # turns, seconds, CPU seconds
    for _ in range(rounds):
        for name, run in runs.items():
            before, started = cpu(), time.perf_counter()
            done = await run()
            total = totals[name]
            total[0] += done
            total[1] += time.perf_counter() - started
            total[2] += cpu() - before
    # The CPU clock counts whole ticks (1/100 s here): each reading may be a
    # tick short, so a way's figure is known to within this per turn.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    return {
        name: {
            "turns": done,
            "turns_per_s": round(done / seconds, 1),
            "gateway_cpu_ms_per_turn": round(used / max(done, 1) * 1000, 3),
            "resolution_ms_per_turn": round(rounds * tick / max(done, 1) * 1000, 3),
        }
        for name, (done, seconds, used) in totals.items()
    }
