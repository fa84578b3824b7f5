"""``python -m config.serve``: daphne as web processes run it (config/serve.py).

Its writes leave at once when nothing is queued before them and take
Twisted's buffered path otherwise; a client that reads slowly exercises
both. Its access log is off unless asked for, its connections have Nagle's
algorithm off, and it applies every patch of config/patches.py.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import ROOT, start_daphne, wait_rows
from tests.support import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def wait_until_full(sock: socket.socket) -> None:
    """Stop reading until the bytes waiting in this client's socket stop
    growing: its buffer, and the server's behind it, are full, and the
    server's writes take the buffered path."""

    def unread() -> int:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4)))[0]

    def stopped_growing() -> bool:
        before = unread()
        time.sleep(0.2)  # the sampling interval of the buffer's size
        return before > 0 and unread() == before

    wait_until(stopped_growing, timeout=15, interval=0)


def test_a_slow_reader_gets_every_event_in_order(provision, simulator):
    tenant = provision("acme", simulator.url)
    web = start_daphne()
    tokens = 30_000  # megabytes of events: more than the sockets' buffers hold
    try:
        events = []
        with httpx.stream(
            "POST",
            web.url + "/v1/responses",
            headers={"authorization": f"Bearer {tenant.key}"},
            json={"model": "sim-model", "input": f"[[tokens:{tokens}]] go", "stream": True},
            timeout=120,
        ) as response:
            assert response.status_code == 200
            sock = response.extensions["network_stream"].get_extra_info("socket")
            paused = False
            for line in response.iter_lines():
                if not paused and len(events) == 100:
                    wait_until_full(sock)
                    paused = True
                if line.startswith("data: "):
                    events.append(orjson.loads(line[6:]))
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        deltas = [e for e in events if e["type"] == "response.output_text.delta"]
        assert len(deltas) == tokens
        final = events[-1]
        assert final["type"] == "response.completed"
        assert final["response"]["output"][0]["content"][0]["text"] == "".join(
            d["delta"] for d in deltas
        )
        assert wait_rows(1, organisation=tenant.organisation)[0].output_tokens == tokens
    finally:
        web.stop()


@pytest.mark.parametrize("args", [(), ("--access-log", "-")])
def test_the_access_log_is_off_unless_asked_for(api_server, args):
    web = start_daphne(args=args)
    try:
        assert httpx.get(web.url + "/healthz", timeout=10).status_code == 200
    finally:
        web.stop()
    logged = '"GET /healthz" 200' in web.log.read_text()
    assert logged == bool(args)


def _server_socket(pid: int, client: socket.socket) -> socket.socket:
    """The server's end of ``client``'s connection, duplicated out of process
    ``pid`` (``pidfd_getfd``; the server is this process's child)."""
    port = client.getsockname()[1]
    inodes = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port:  # remote end: the client's port
                inodes.add(fields[9])
    fd_dir = f"/proc/{pid}/fd"
    target = next(
        int(fd) for fd in os.listdir(fd_dir) if os.readlink(f"{fd_dir}/{fd}")[8:-1] in inodes
    )
    pidfd = os.pidfd_open(pid)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        duplicate = libc.syscall(438, pidfd, target, 0)  # SYS_pidfd_getfd
        if duplicate < 0:
            pytest.skip(f"pidfd_getfd: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(pidfd)
    return socket.socket(fileno=duplicate)


def test_connections_are_served_without_nagles_algorithm(api_server):
    """Twisted's HTTP channel turns TCP_NODELAY on as each connection is made,
    so a small event that follows another is not held for the client's ACK."""
    with socket.create_connection(("127.0.0.1", api_server.port), timeout=10) as client:
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
        with _server_socket(api_server.process.pid, client) as server_end:
            assert server_end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        # The check can tell: the client's own socket leaves Nagle on.
        assert not client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_every_server_patch_is_applied(api_server):
    """On the pinned Twisted and daphne, every patch checks out: the start-up
    line lists all of them and no patch was left out."""
    from config import patches

    log = api_server.log.read_text()
    assert f"Server patches: {', '.join(patches.NAMES)}" in log
    assert "not applied" not in log


def _tls_after_start(argv: list[str]) -> dict:
    """In a new interpreter, prepare as ``config.serve`` does for ``argv``
    and import daphne: what is then loaded, and what Twisted's TCP offers."""
    code = f"""
import json, sys
from config import serve
kept_out = serve.skip_tls_libraries({argv!r})
from daphne import server
from twisted.internet import tcp
from twisted.internet.interfaces import ITLSTransport
print(json.dumps({{
    "kept_out": kept_out,
    "pyopenssl": sys.modules.get("OpenSSL") is not None,
    "x509": "cryptography.x509" in sys.modules,
    "service_identity": "service_identity" in sys.modules,
    "twisted_tls": ITLSTransport.implementedBy(tcp.Server),
}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return orjson.loads(out.stdout)


def test_a_server_without_a_tls_endpoint_loads_no_tls_library():
    """Twisted then serves plain TCP: its server sockets offer no TLS."""
    loaded = _tls_after_start(["-b", "0.0.0.0", "-p", "8000", "config.asgi:application"])
    assert loaded == {
        "kept_out": True,
        "pyopenssl": False,
        "x509": False,
        "service_identity": False,
        "twisted_tls": False,
    }


def test_a_server_given_a_tls_endpoint_keeps_the_tls_library():
    loaded = _tls_after_start(["-e", "ssl:8443:privateKey=k.pem:certKey=c.pem", "a:b"])
    assert loaded["kept_out"] is False
    assert loaded["pyopenssl"] and loaded["x509"] and loaded["twisted_tls"]
