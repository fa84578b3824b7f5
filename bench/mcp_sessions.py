"""What keeping one MCP session per response saves: a listing and N calls
against the test MCP server (``tests/tools/servers/mcp_server.py``, started
here), each in a session of its own, then all in one session
(``responses_api.tools.mcp_sessions``). Prints the wall time of each way
(median of the repeats) and what the server counted: HTTP requests, TCP
connections, ``initialize`` handshakes.

Usage: ``python -m bench.mcp_sessions [--calls 5] [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

import httpx

from tests.conftest import free_port, wait_http


async def loop(url: str, calls: int, pooled: bool) -> float:
    from responses_api.tools.mcp import McpServer, call_tool, list_tools
    from responses_api.tools.mcp_sessions import Sessions

    server = McpServer("bench", url, "streamable_http", allow_private=True)
    sessions = Sessions(60) if pooled else None
    started = time.perf_counter()
    try:
        await list_tools(server, timeout=10, sessions=sessions)
        for n in range(calls):
            outcome = await call_tool(
                server, "add", {"a": n, "b": 1}, timeout=10, max_output_bytes=64, sessions=sessions
            )
            assert outcome.output == str(n + 1), outcome
    finally:
        if sessions is not None:
            await sessions.aclose()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    import django

    django.setup()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.tools.servers.mcp_server", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/health", timeout=30, proc=process)
        asyncio.run(loop(base + "/mcp", 1, False))  # imports and first connection
        print(f"A listing and {args.calls} calls, {args.repeats} repeats:")
        for pooled in (False, True):
            before = httpx.get(base + "/stats").json()
            times = [
                asyncio.run(loop(base + "/mcp", args.calls, pooled)) for _ in range(args.repeats)
            ]
            after = httpx.get(base + "/stats").json()
            counted = {key: (after[key] - before[key]) / args.repeats for key in after}
            print(
                f"  {'one session' if pooled else 'a session each':>15}: "
                f"{statistics.median(times) * 1000:6.1f} ms median, "
                f"{counted['requests']:.0f} HTTP requests, "
                f"{counted['connections']:.0f} connections, "
                f"{counted['initialize']:.0f} initialize"
            )
    finally:
        process.kill()


if __name__ == "__main__":
    main()
