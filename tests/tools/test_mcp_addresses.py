"""An MCP server's URL comes from a request: the gateway is no proxy into the
network it runs in. The backend address policy applies at connect time: an
IP literal is judged as given, a name by what it resolves to now, and a
refused connection is never opened. Connection and TLS failures are
outcomes like any other."""

from __future__ import annotations

import socket

import pytest

from responses_api.catalogue import addresses
from responses_api.tools.mcp import McpServer, McpUnavailable, call_tool, list_tools
from tests.conftest import free_port
from tests.tools.conftest import run_alone

pytestmark = pytest.mark.live


@pytest.fixture
def platform_refuses_private(settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False


@pytest.fixture
def listener():
    """A listening socket that no one accepts from: whether a connection
    was opened to it shows in its accept queue."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def _connections(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            connection, _ = sock.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def _call(url: str, **extra):
    server = McpServer(label="tools", url=url, transport="streamable_http", **extra)
    outcome, pending = run_alone(call_tool(server, "add", {}, timeout=5, max_output_bytes=4096))
    assert pending == []
    return outcome


@pytest.mark.usefixtures("platform_refuses_private")
def test_a_private_literal_is_refused_and_never_connected_to(listener):
    port = listener.getsockname()[1]
    outcome = _call(f"http://127.0.0.1:{port}/mcp")
    assert outcome.error == (
        "The MCP server's address 127.0.0.1 is not allowed: it is a loopback address."
    )
    assert _connections(listener) == 0


@pytest.mark.usefixtures("platform_refuses_private")
def test_a_name_resolving_to_loopback_is_refused_at_connect_time(listener):
    port = listener.getsockname()[1]
    outcome = _call(f"http://localhost:{port}/mcp")
    assert outcome.error == (
        "The MCP server's address localhost is not allowed: it resolves to a loopback address."
    )
    assert "127.0.0.1" not in outcome.error
    assert _connections(listener) == 0


@pytest.mark.usefixtures("platform_refuses_private")
def test_the_servers_own_flag_opens_loopback(mcp_server):
    port = mcp_server.port
    for url in (f"http://localhost:{port}/mcp", f"http://127.0.0.1:{port}/mcp"):
        server = McpServer(label="tools", url=url, allow_private=True)
        tools, _ = run_alone(list_tools(server, timeout=10))
        assert "add" in {tool.name for tool in tools}


@pytest.mark.usefixtures("platform_refuses_private")
@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("[::1]", "a loopback"),
        ("[::ffff:127.0.0.1]", "a loopback"),
        ("10.1.2.3", "a private"),
        ("100.64.0.9", "a shared (carrier-grade NAT)"),
        ("0.0.0.0", "an unspecified"),
    ],
)
def test_every_non_public_literal_is_refused(host, kind):
    error = _call(f"http://{host}:8000/mcp").error
    assert error.endswith(f"is not allowed: it is {kind} address.")


@pytest.mark.usefixtures("platform_refuses_private")
def test_listing_tools_at_a_refused_address_is_mcp_unavailable():
    server = McpServer(label="internal", url="http://10.0.0.8:8000/mcp")
    with pytest.raises(McpUnavailable) as caught:
        run_alone(list_tools(server, timeout=5))
    assert "is not allowed: it is a private address" in caught.value.message


def test_the_metadata_service_stays_refused_with_the_platform_setting(settings, monkeypatch):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = True

    def rebinding(host: str, port: int) -> list[str]:
        return ["169.254.169.254"] if host == "innocent.example" else []

    monkeypatch.setattr(addresses, "resolve", rebinding)
    refusals = {
        "http://169.254.169.254/mcp": "it is a cloud metadata address",
        "http://[fd00:ec2::254]/mcp": "it is a cloud metadata address",
        "http://metadata.google.internal/mcp": "it is a cloud metadata address",
        "http://innocent.example/mcp": "it resolves to a cloud metadata address",
        "http://169.254.10.1/mcp": "it is a link-local address",
    }
    for url, refusal in refusals.items():
        assert refusal in _call(url).error, url


def test_a_name_that_does_not_resolve_is_a_connection_failure():
    # tests/conftest.py resolves localhost and IP literals only.
    assert _call("http://mcp.unknown.example/mcp").error == "Could not connect to the MCP server."


def test_a_closed_port_is_a_connection_failure():
    outcome = _call(f"http://127.0.0.1:{free_port()}/mcp", allow_private=True)
    assert outcome.error == "Could not connect to the MCP server."
    assert (outcome.kind, outcome.code) == ("protocol", -32000)


def test_a_failed_tls_handshake_is_an_outcome(mcp_server):
    # TLS spoken to a plain-HTTP server: the handshake fails.
    outcome = _call(f"https://127.0.0.1:{mcp_server.port}/mcp", allow_private=True)
    assert outcome.error == "The TLS handshake with the MCP server failed."


@pytest.mark.parametrize(
    "url", ["ftp://example.com/mcp", "http://user:secret@example.com/mcp", "not a url"]
)
def test_a_url_that_is_not_http_is_an_outcome(url):
    outcome = _call(url)
    assert outcome.error.startswith("The MCP server's URL is not valid: ")
    assert "secret" not in outcome.error


@pytest.mark.usefixtures("platform_refuses_private")
@pytest.mark.parametrize("host", ["2130706433", "127.1", "0x7f.0.0.1"])
def test_old_numeric_forms_of_loopback_are_refused(host, listener):
    port = listener.getsockname()[1]
    error = _call(f"http://{host}:{port}/mcp").error
    assert "is not allowed" in error and "loopback" in error
    assert _connections(listener) == 0


def test_a_policy_given_with_the_server_is_the_one_obeyed(settings, mcp_server):
    """The catalogue resolves a request's tool to a policy of its own."""
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = True
    url = f"http://127.0.0.1:{mcp_server.port}/mcp"
    closed = addresses.AddressPolicy(private=False, link_local=False)
    outcome = _call(url, allow_private=True, policy=closed)
    assert outcome.error.endswith("is not allowed: it is a loopback address.")
    opened = addresses.AddressPolicy(private=True, link_local=False)
    assert _call(url, policy=opened).error is None
