"""Listing and calling the tools of a real MCP server (the ``mcp`` SDK's
``MCPServer`` in a process of its own) over Streamable HTTP and SSE."""

from __future__ import annotations

import hashlib
import logging
import time

import pytest

from responses_api.tools.mcp import McpServer, McpUnavailable, call_tool, list_tools
from tests.tools.conftest import TOKEN, run_alone

pytestmark = pytest.mark.live

# Each transport, and "auto" finding each.
TRANSPORTS = [
    ("streamable_http", "/mcp"),
    ("sse", "/sse"),
    ("auto", "/mcp"),
    ("auto", "/sse"),
]


def _server(root: str, path: str = "/mcp", transport: str = "auto", **extra) -> McpServer:
    return McpServer(
        label="tests", url=root + path, transport=transport, allow_private=True, **extra
    )


def _call(server: McpServer, name: str, arguments: dict, *, timeout=10.0, cap=64 * 1024):
    outcome, pending = run_alone(
        call_tool(server, name, arguments, timeout=timeout, max_output_bytes=cap)
    )
    assert pending == []
    return outcome


@pytest.mark.parametrize(("transport", "path"), TRANSPORTS)
def test_tools_are_listed_with_their_schema_and_read_only_hint(mcp_server, transport, path):
    tools, pending = run_alone(list_tools(_server(mcp_server.url, path, transport), timeout=10))
    assert pending == []
    by_name = {tool.name: tool for tool in tools}
    assert {"add", "echo", "lookup", "fail", "sleep", "whoami", "big"} <= set(by_name)
    add = by_name["add"]
    assert add.description == "Add two integers."
    assert add.input_schema["type"] == "object"
    assert set(add.input_schema["properties"]) == {"a", "b"}
    assert by_name["lookup"].read_only is True
    assert add.read_only is False


@pytest.mark.parametrize(("transport", "path"), TRANSPORTS)
def test_a_call_returns_the_tools_text(mcp_server, transport, path):
    server = _server(mcp_server.url, path, transport)
    outcome = _call(server, "add", {"a": 2, "b": 40})
    assert (outcome.output, outcome.error, outcome.is_error) == ("42", None, False)
    assert _call(server, "echo", {"text": "héllo — ✓"}).output == "héllo — ✓"


@pytest.mark.parametrize(("transport", "path"), TRANSPORTS[:2])
def test_a_tool_error_is_an_outcome_with_is_error_and_its_text(mcp_server, transport, path):
    outcome = _call(_server(mcp_server.url, path, transport), "fail", {"reason": "no stock"})
    assert outcome.is_error is True and outcome.error is None
    assert "failed on purpose: no stock" in outcome.output


def test_an_unknown_tool_is_a_tool_error(mcp_server):
    outcome = _call(_server(mcp_server.url), "no_such_tool", {})
    assert outcome.is_error is True and "no_such_tool" in outcome.output


def test_content_other_than_text_is_described_in_one_line(mcp_server):
    outcome = _call(_server(mcp_server.url), "picture", {})
    assert outcome.error is None
    text, image = outcome.output.split("\n")
    assert text == "a dot"
    assert image.startswith("[image: image/png, ") and image.endswith(" bytes]")


def test_a_long_output_is_cut_at_the_cap_and_says_so(mcp_server):
    outcome = _call(_server(mcp_server.url), "big", {"size": 30_000}, cap=10_000)
    assert outcome.error is None
    assert len(outcome.output.encode()) <= 10_000
    assert outcome.output.endswith("[output cut at 10000 bytes]")


@pytest.mark.parametrize(("transport", "path"), TRANSPORTS[:2])
def test_an_answer_past_the_byte_cap_aborts_the_call(mcp_server, transport, path):
    outcome = _call(_server(mcp_server.url, path, transport), "big", {"size": 2_000_000})
    assert outcome.output == ""
    assert "exceeded" in outcome.error and "aborted" in outcome.error


@pytest.mark.parametrize(("transport", "path"), TRANSPORTS[:2])
def test_a_slow_tool_times_out_within_the_timeout(mcp_server, transport, path):
    started = time.perf_counter()
    outcome = _call(_server(mcp_server.url, path, transport), "sleep", {"seconds": 30}, timeout=1.5)
    took = time.perf_counter() - started
    assert outcome.error == "The MCP server did not answer within 1.5 seconds."
    assert 1.4 < took < 3.0


@pytest.mark.parametrize(("transport", "path"), TRANSPORTS[:2])
def test_the_authorization_and_headers_reach_the_server(mcp_server, transport, path):
    server = _server(
        mcp_server.url, path, transport, authorization=TOKEN, headers={"X-Tenant": "acme"}
    )
    outcome = _call(server, "whoami", {})
    digest = hashlib.sha256(f"Bearer {TOKEN}".encode()).hexdigest()
    assert outcome.output == f"authorization-sha256={digest};tenant=acme"


@pytest.mark.parametrize(("transport", "path"), TRANSPORTS)
def test_the_token_is_never_logged_nor_returned(mcp_server, caplog, transport, path):
    caplog.set_level(logging.DEBUG)
    server = _server(mcp_server.url, path, transport, authorization=TOKEN)
    run_alone(list_tools(server, timeout=10))
    outcome = _call(server, "reveal", {})
    assert outcome.output == "you sent Bearer [redacted]"
    assert TOKEN not in caplog.text
    assert caplog.records, "the SDK's and httpx2's debug logs were captured"
    assert TOKEN not in repr(server)


def test_list_tools_failure_is_mcp_unavailable_with_the_server_label(mcp_server):
    url = mcp_server.url + "/nowhere"
    server = McpServer(label="docs", url=url, transport="streamable_http", allow_private=True)
    with pytest.raises(McpUnavailable) as caught:
        run_alone(list_tools(server, timeout=10))
    assert caught.value.server_label == "docs"
    assert str(caught.value) == "The MCP server answered HTTP 404."
    assert caught.value.http_status == 404


def test_the_authorization_replaces_a_header_of_that_name_and_transport_headers_are_dropped(
    mcp_server,
):
    headers = {"authorization": "Basic b3RoZXI=", "Mcp-Session-Id": "forged", "X-Tenant": "acme"}
    server = _server(mcp_server.url, authorization=TOKEN, headers=headers)
    assert server.request_headers() == {"X-Tenant": "acme", "Authorization": f"Bearer {TOKEN}"}
    digest = hashlib.sha256(f"Bearer {TOKEN}".encode()).hexdigest()
    assert _call(server, "whoami", {}).output == f"authorization-sha256={digest};tenant=acme"
