"""One MCP session per server for a whole response: the listing and every
call of the loop share it (one ``initialize``, counted by the test server),
a broken session is replaced for the next call, and every session is
closed when the response ends, however it ends: nothing is left behind."""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from openai import OpenAI

from accounts.audit import CLI
from responses_api.catalogue.services.mcp_servers import mcp_server_create
from responses_api.tools.mcp import McpServer, call_tool, list_tools
from responses_api.tools.mcp_sessions import Sessions
from tests.conftest import usage_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FIVE = " ".join(f'[[call:calc__add {{"a": {n}, "b": 1}}]]' for n in range(5))


def stats(server) -> dict[str, int]:
    return httpx.get(server.url + "/stats", timeout=10).json()


def since(server, before: dict[str, int]) -> dict[str, int]:
    now = stats(server)
    return {key: now[key] - before[key] for key in now}


def register(people, url: str, transport: str) -> None:
    mcp_server_create(
        organisation=people["acme"],
        actor=CLI,
        label="calc",
        server_url=url,
        transport=transport,
        require_approval="never",
        allow_private=True,
    )


@pytest.mark.parametrize(("transport", "path"), [("streamable_http", "/mcp"), ("sse", "/sse")])
def test_a_loop_of_five_calls_opens_one_session(
    client: OpenAI, mcp_server, acme, people, transport, path
):
    register(people, mcp_server.url + path, transport)
    before = stats(mcp_server)
    response = client.responses.create(
        model="sim-model",
        input=f"Add them. {FIVE}",
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    calls = [item for item in response.output if item.type == "mcp_call"]
    assert [call.output for call in calls] == ["1", "2", "3", "4", "5"]
    # The listing and the five calls: one session, one handshake.
    counted = since(mcp_server, before)
    assert counted["initialize"] == 1
    if transport == "streamable_http":
        # Closed with the response, as a session of its own says to its server.
        assert counted["deleted"] == 1
        # initialize, initialized, tools/list, 5 calls, the GET stream, DELETE.
        assert counted["requests"] <= 10
    [row] = wait_for(lambda: usage_rows(model="sim-model"), timeout=10)
    assert row.tool_calls == 5


def test_a_broken_session_is_replaced_for_the_next_call(
    client: OpenAI, mcp_server, acme, people, settings
):
    register(people, mcp_server.url + "/mcp", "streamable_http")
    settings.SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS = 1
    before = stats(mcp_server)
    response = client.responses.create(
        model="sim-model",
        input='[[call:calc__sleep {"seconds": 5}]] [[call:calc__add {"a": 2, "b": 2}]]',
        tools=[{"type": "mcp", "server_label": "calc", "require_approval": "never"}],
    )
    slept, added = (item for item in response.output if item.type == "mcp_call")
    assert slept.status == "failed" and slept.error is not None
    assert slept.error.type == "mcp_protocol_error" and slept.error.code == -32001
    assert "1 s" in slept.error.message
    assert added.output == "4"
    # The session cut short by the timeout was replaced by one more.
    assert since(mcp_server, before)["initialize"] == 2


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


def test_sessions_close_when_the_response_is_cancelled(mcp_server):
    server = McpServer("tests", mcp_server.url + "/mcp", "streamable_http", allow_private=True)

    async def response(sessions: Sessions) -> None:
        await list_tools(server, timeout=10, sessions=sessions)
        for n in range(3):
            outcome = await call_tool(
                server, "add", {"a": n, "b": n}, timeout=10, max_output_bytes=64, sessions=sessions
            )
            assert outcome.output == str(2 * n)
        await call_tool(
            server, "sleep", {"seconds": 30}, timeout=60, max_output_bytes=64, sessions=sessions
        )

    async def main():
        before = _sockets()
        sessions = Sessions(60)
        task = asyncio.create_task(response(sessions))
        await asyncio.sleep(1.5)
        assert not task.done()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        finally:
            await sessions.aclose()
        await asyncio.sleep(0.05)
        current = asyncio.current_task()
        return sessions.opened, [t for t in asyncio.all_tasks() if t is not current], before

    initialised = stats(mcp_server)["initialize"]
    opened, pending, before = asyncio.run(main())
    assert opened == 1 and stats(mcp_server)["initialize"] == initialised + 1
    assert pending == []
    assert _sockets() - before <= 0


def test_closed_sessions_take_no_more_calls(mcp_server):
    server = McpServer("tests", mcp_server.url + "/mcp", "streamable_http", allow_private=True)

    async def main():
        sessions = Sessions(60)
        await list_tools(server, timeout=10, sessions=sessions)
        await sessions.aclose()
        return await call_tool(
            server, "add", {"a": 1, "b": 1}, timeout=10, max_output_bytes=64, sessions=sessions
        )

    outcome = asyncio.run(main())
    assert outcome.failed
