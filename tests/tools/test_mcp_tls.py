"""TLS to an MCP server is verified against the name in its URL, though the
connection is made to the address the client resolved itself (the address
policy's connect-time check)."""

from __future__ import annotations

import datetime
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from responses_api.tools import connection
from responses_api.tools.mcp import McpServer, call_tool
from tests.tools.conftest import run_alone, start_server

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for the name ``localhost`` only."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return directory / "cert.pem", directory / "key.pem"


@pytest.fixture(scope="module")
def tls_server(certificate):
    cert, key = certificate
    server = start_server("tests.tools.servers.mcp_server", "mcp-tls", "", str(cert), str(key))
    yield server
    server.stop()


@pytest.fixture
def trusting(monkeypatch, certificate):
    """The client trusts the test certificate, as it would a public CA's."""
    context = ssl.create_default_context(cafile=str(certificate[0]))
    monkeypatch.setattr(connection, "tls_context", lambda: context)


def _add(url: str):
    server = McpServer("tls", url, "streamable_http", allow_private=True)
    arguments = {"a": 1, "b": 2}
    outcome, _ = run_alone(call_tool(server, "add", arguments, timeout=10, max_output_bytes=64))
    return outcome


def test_a_certificate_no_trusted_authority_signed_is_refused(tls_server):
    outcome = _add(f"https://localhost:{tls_server.port}/mcp")
    assert outcome.error == "The TLS handshake with the MCP server failed."
    assert (outcome.kind, outcome.code) == ("protocol", -32000)


@pytest.mark.usefixtures("trusting")
def test_a_trusted_certificate_is_checked_against_the_urls_name(tls_server):
    assert _add(f"https://localhost:{tls_server.port}/mcp").output == "3"
    # The same server by its address: the certificate does not name it.
    outcome = _add(f"https://127.0.0.1:{tls_server.port}/mcp")
    assert outcome.error == "The TLS handshake with the MCP server failed."
