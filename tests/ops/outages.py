"""Real servers a test can break: a Redis server of its own (with a Unix
socket and, on demand, a Sentinel watching it), and a TCP proxy whose line
can be cut and restored, and a server that never answers, to stage a
dependency's outage without mocking the client that suffers it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import _log_path, free_port, wait_for

PASSWORD = "redis-test-password"


@dataclass
class RedisServer:
    port: int
    socket_path: Path
    process: subprocess.Popen
    tls_port: int | None = None
    ca_path: Path | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://:{PASSWORD}@127.0.0.1:{self.port}/{db}"


def certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for 127.0.0.1 and localhost:
    (CA certificate, server certificate, server key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "switchyard test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def redis_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return binary


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def redis_server(directory: Path, tls: bool = False) -> Iterator[RedisServer]:
    """A password-protected, non-persistent redis-server on a free port and a
    socket, and with ``tls`` on a TLS port too (``ca_path`` verifies it)."""
    port = free_port()
    sock = directory / "redis.sock"
    log = _log_path("redis")
    tls_args: list[str] = []
    tls_port = ca_path = None
    if tls:
        ca_path, cert, key = certificates(directory)
        tls_port = free_port()
        tls_args = [
            *("--tls-port", str(tls_port), "--tls-cert-file", str(cert)),
            *("--tls-key-file", str(key), "--tls-ca-cert-file", str(ca_path)),
            *("--tls-auth-clients", "no"),
        ]
    process = subprocess.Popen(
        [
            redis_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "700",
            "--requirepass",
            PASSWORD,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
            *tls_args,
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    server = RedisServer(port, sock, process, tls_port, ca_path)
    try:
        client = redis.Redis.from_url(server.url(), socket_timeout=1)
        wait_for(lambda: _answers(client, process), timeout=20)
        yield server
    finally:
        _stop(process)


def _answers(client: redis.Redis, process: subprocess.Popen) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"redis-server exited with {process.returncode}")
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@contextmanager
def sentinel(directory: Path, master: RedisServer, service: str = "mymaster") -> Iterator[int]:
    """``redis-server --sentinel`` watching ``master`` as ``service``; yields its port."""
    port = free_port()
    conf = directory / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
        f"sentinel monitor {service} 127.0.0.1 {master.port} 1\n"
        f"sentinel auth-pass {service} {PASSWORD}\n"
    )
    log = _log_path("sentinel")
    process = subprocess.Popen(
        [redis_binary(), str(conf), "--sentinel"], stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)

        def knows_master() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"sentinel exited with {process.returncode}: {log.read_text()}")
            try:
                return client.sentinel_get_master_addr_by_name(service) is not None
            except redis.RedisError:
                return False

        wait_for(knows_master, timeout=20)
        yield port
    finally:
        _stop(process)


class TcpProxy:
    """Forwards a local port to ``target``. :meth:`cut` drops every open
    connection and turns new ones away (they are closed at once), as a
    dependency that went away would; :meth:`hang` lets connections in but
    answers nothing on any of them, as an unreachable host whose packets
    vanish would; :meth:`restore` lets them through again (closing those
    left hanging)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = True
        self.hanging = False
        self._held: set[socket.socket] = set()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self.up = False
            for sock in self._open:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def hang(self) -> None:
        with self._lock:
            self.hanging = True

    def restore(self) -> None:
        with self._lock:
            self.up = True
            if self.hanging:
                self.hanging = False
                for sock in self._held | self._open:
                    with suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
                self._held.clear()
                self._open.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                if not self.up:
                    client.close()
                    continue
                if self.hanging:
                    self._held.add(client)
                    continue
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                except OSError:
                    client.close()
                    continue
                upstream.settimeout(None)
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self.hanging:  # hanging: what is sent goes nowhere
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._open.discard(source)
            source.close()


@contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port that accepts every connection and never sends a byte
    (what it is sent is read and dropped); yields the port."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    closed = threading.Event()

    def drain(conn: socket.socket) -> None:
        with suppress(OSError):
            while conn.recv(65536):
                pass

    def accept() -> None:
        while not closed.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        closed.set()
        listener.close()
        for conn in held:
            conn.close()
