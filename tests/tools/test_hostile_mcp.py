"""An MCP server's answer is untrusted input.

A server that hangs, answers 50 MB, answers what is no JSON-RPC, drops the
connection halfway or answers an HTML 500 ends the call with an outcome
saying so, within the timeout, never an exception; listing its tools is
``McpUnavailable``. The 50 MB answer is aborted as it arrives: the process's
memory does not grow by anything like it, and the server could write only
what the sockets' buffers hold before the client hung up.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path

import httpx
import pytest

from responses_api.tools.mcp import McpServer, McpUnavailable, call_tool, list_tools
from tests.tools.conftest import TOKEN, run_alone

pytestmark = pytest.mark.live

TIMEOUT = 3.0
CAP = 256 * 1024
BROKE = "The connection to the MCP server broke before the answer was complete."
NOT_JSONRPC = "The MCP server's answer is not valid JSON-RPC."
SLOW = "The MCP server did not answer within 3 seconds."

# Each behaviour (tests/tools/servers/hostile_mcp.py) and the outcome's error.
BEHAVIOURS = {
    "hang": SLOW,
    "hang-accept": SLOW,
    "huge": "exceeded",
    "huge-sse": "exceeded",
    "gzip-bomb": "The MCP server sent a compressed answer, which is refused.",
    "garbage": NOT_JSONRPC,
    "garbage-secret": NOT_JSONRPC,
    "not-jsonrpc": NOT_JSONRPC,
    "drop": BROKE,
    "drop-sse": BROKE,
    "html-500": "The MCP server answered HTTP 500.",
    "unauthorized": "The MCP server refused the authorization (HTTP 401).",
    "echo-secret": "The MCP server answered with an error: bad credentials: Bearer [redacted]",
    "rpc-error": "The MCP server answered with an error: no such city: Atlantis",
    "rpc-error-huge": "The MCP server answered with an error: a code past any integer type",
}
# And how each is classified: an HTTP status, or a JSON-RPC error code (the
# server's own, -32001 for no answer in time, -32000 for an answer not
# understood or a connection lost).
CODES = {
    "hang": ("protocol", -32001),
    "hang-accept": ("protocol", -32001),
    "huge": ("protocol", -32000),
    "huge-sse": ("protocol", -32000),
    "gzip-bomb": ("protocol", -32000),
    "garbage": ("protocol", -32000),
    "garbage-secret": ("protocol", -32000),
    "not-jsonrpc": ("protocol", -32000),
    "drop": ("protocol", -32000),
    "drop-sse": ("protocol", -32000),
    "html-500": ("http", 500),
    "unauthorized": ("http", 401),
    "echo-secret": ("protocol", -32001),
    "rpc-error": ("protocol", -32602),
    "rpc-error-huge": ("protocol", -32000),
}


def _server(hostile, behaviour: str, transport: str = "streamable_http") -> McpServer:
    return McpServer(
        label="hostile",
        url=f"{hostile.url}/{behaviour}/mcp",
        transport=transport,
        authorization=TOKEN,
        allow_private=True,
    )


@pytest.mark.parametrize("behaviour", list(BEHAVIOURS))
def test_a_hostile_answer_is_an_outcome_within_the_timeout(hostile_mcp, behaviour):
    started = time.perf_counter()
    outcome, pending = run_alone(
        call_tool(_server(hostile_mcp, behaviour), "add", {}, timeout=TIMEOUT, max_output_bytes=CAP)
    )
    took = time.perf_counter() - started
    assert pending == []
    assert outcome.output == "" and outcome.is_error is False
    assert BEHAVIOURS[behaviour] in outcome.error
    assert (outcome.kind, outcome.code) == CODES[behaviour]
    assert TOKEN not in outcome.error
    assert took < TIMEOUT + 1.0
    if BEHAVIOURS[behaviour] != SLOW:
        # At once, not at the deadline (with room for a loaded machine).
        assert took < TIMEOUT / 2, "a failure the client can see ends the call"


@pytest.mark.parametrize("behaviour", list(BEHAVIOURS))
def test_listing_a_hostile_servers_tools_is_mcp_unavailable(hostile_mcp, behaviour):
    with pytest.raises(McpUnavailable) as caught:
        run_alone(list_tools(_server(hostile_mcp, behaviour), timeout=TIMEOUT, max_bytes=CAP))
    assert caught.value.server_label == "hostile"
    assert BEHAVIOURS[behaviour] in caught.value.message
    assert TOKEN not in caught.value.message
    statuses = {"html-500": 500, "unauthorized": 401}
    assert caught.value.http_status == statuses.get(behaviour)


@pytest.mark.parametrize("behaviour", ["hang", "html-500", "unauthorized"])
def test_auto_transport_gives_the_same_outcome(hostile_mcp, behaviour):
    outcome, _ = run_alone(
        call_tool(
            _server(hostile_mcp, behaviour, "auto"),
            "add",
            {},
            timeout=TIMEOUT,
            max_output_bytes=CAP,
        )
    )
    assert BEHAVIOURS[behaviour] in outcome.error


def _peak_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1))


@pytest.mark.parametrize("behaviour", ["huge", "huge-sse", "gzip-bomb"])
def test_a_50_mb_answer_is_never_held_whole(hostile_mcp, behaviour):
    before = httpx.get(hostile_mcp.url + "/stats").json().get(behaviour, 0)
    # Resets the peak resident size (Linux), so the peak below is this call's.
    Path("/proc/self/clear_refs").write_text("5")
    baseline = _peak_kib()
    outcome, _ = run_alone(
        call_tool(_server(hostile_mcp, behaviour), "add", {}, timeout=30, max_output_bytes=CAP)
    )
    grown_mib = (_peak_kib() - baseline) / 1024
    assert BEHAVIOURS[behaviour] in outcome.error
    assert grown_mib < 20, f"the process grew by {grown_mib:.0f} MiB"
    if behaviour == "gzip-bomb":
        return  # small on the wire: its danger is in decoding
    sent_mib = (httpx.get(hostile_mcp.url + "/stats").json()[behaviour] - before) / 2**20
    assert sent_mib < 25, f"the server wrote {sent_mib:.0f} MiB before the client hung up"


@pytest.mark.parametrize(
    ("behaviour", "error"),
    [
        ("unauthorized", "The MCP server refused the authorization (HTTP 401)."),
        ("html-500", "The MCP server answered HTTP 405."),
    ],
)
def test_an_sse_stream_refused_is_an_outcome(hostile_mcp, behaviour, error):
    outcome, pending = run_alone(
        call_tool(
            _server(hostile_mcp, behaviour, "sse"), "add", {}, timeout=TIMEOUT, max_output_bytes=CAP
        )
    )
    assert pending == []
    assert outcome.error == error


def test_a_token_the_server_echoes_is_not_logged(hostile_mcp, caplog):
    """The SDK logs what it cannot parse, with a traceback: without the token."""
    caplog.set_level(logging.DEBUG)
    server = _server(hostile_mcp, "garbage-secret")
    outcome, _ = run_alone(call_tool(server, "add", {}, timeout=TIMEOUT, max_output_bytes=CAP))
    assert outcome.error == NOT_JSONRPC
    assert "<<Bearer [redacted]>>" in caplog.text
    assert TOKEN not in caplog.text


def test_parallel_calls_each_get_their_own_outcome(hostile_mcp, mcp_server):
    """The loop may run a turn's tool calls at once: a hostile server's
    failures stay its own calls'."""

    good = McpServer("good", mcp_server.url + "/mcp", "streamable_http", allow_private=True)
    behaviours = ["hang", "huge", "drop", "garbage", "html-500"]

    async def main():
        calls = [
            call_tool(good, "add", {"a": i, "b": 1}, timeout=TIMEOUT, max_output_bytes=CAP)
            for i in range(5)
        ]
        calls += [
            call_tool(_server(hostile_mcp, b), "add", {}, timeout=TIMEOUT, max_output_bytes=CAP)
            for b in behaviours
        ]
        return await asyncio.gather(*calls)

    outcomes, pending = run_alone(main())
    assert pending == []
    assert [o.output for o in outcomes[:5]] == ["1", "2", "3", "4", "5"]
    for behaviour, outcome in zip(behaviours, outcomes[5:], strict=True):
        assert BEHAVIOURS[behaviour] in outcome.error
