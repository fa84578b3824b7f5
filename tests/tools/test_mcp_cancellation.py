"""Cancelling the caller's asyncio task cancels its MCP session: the
``CancelledError`` goes on, no task of the SDK's anyio task groups is left
pending and no connection is left open, whatever the session was doing."""

from __future__ import annotations

import asyncio
import os

import pytest

from responses_api.tools.mcp import McpServer, call_tool, list_tools

pytestmark = pytest.mark.live


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


async def _cancelled_midway(coroutine, after: float) -> list[asyncio.Task]:
    task = asyncio.create_task(coroutine)
    await asyncio.sleep(after)
    assert not task.done(), "the call was still in flight when cancelled"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not current]


@pytest.mark.parametrize(("transport", "path"), [("streamable_http", "/mcp"), ("sse", "/sse")])
def test_cancelling_a_call_in_flight_leaves_nothing_behind(mcp_server, transport, path):
    server = McpServer("tests", mcp_server.url + path, transport, allow_private=True)
    call = call_tool(server, "sleep", {"seconds": 30}, timeout=60, max_output_bytes=4096)

    async def main():
        before = _sockets()
        pending = await _cancelled_midway(call, after=0.8)
        return pending, _sockets() - before

    pending, sockets_left = asyncio.run(main())
    assert pending == []
    # None left open by the call; the process's other connections (its
    # database's, Redis's) may close meanwhile.
    assert sockets_left <= 0


@pytest.mark.parametrize("behaviour", ["hang-accept", "hang"])
def test_cancelling_during_the_handshake_or_a_hung_call_leaves_nothing_behind(
    hostile_mcp, behaviour
):
    server = McpServer(
        "hostile", f"{hostile_mcp.url}/{behaviour}/mcp", "streamable_http", allow_private=True
    )

    async def main():
        before = _sockets()
        pending = await _cancelled_midway(list_tools(server, timeout=60), after=0.5)
        return pending, _sockets() - before

    pending, sockets_left = asyncio.run(main())
    assert pending == []
    # None left open by the call; the process's other connections (its
    # database's, Redis's) may close meanwhile.
    assert sockets_left <= 0


def test_a_callers_own_deadline_cancels_the_session(mcp_server):
    server = McpServer("tests", mcp_server.url + "/mcp", "streamable_http", allow_private=True)

    async def main():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.8):
                await call_tool(server, "sleep", {"seconds": 30}, timeout=60, max_output_bytes=64)
        await asyncio.sleep(0.05)
        current = asyncio.current_task()
        return [t for t in asyncio.all_tasks() if t is not current]

    assert asyncio.run(main()) == []
