"""platform/nginx/switchyard.conf, run for real in front of two web processes.

The benchmark's ``--processes N`` serves through this configuration
(``bench/nginx.py`` derives it: the bench's ports, plain HTTP, the run's
directory); here a real nginx runs it: requests are spread over both
processes, SSE passes through unbuffered, and the API's own 413 envelope
answers an oversized body.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import (
    ROOT,
    Proc,
    _log_path,
    free_port,
    server_env,
    start_daphne,
    wait_http,
)

sys.path.insert(0, str(ROOT / "bench"))
import nginx  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def behind_nginx(tmp_path):
    yield from _behind_nginx(tmp_path)


@pytest.fixture
def behind_nginx_stock(tmp_path):
    """The same, with stock daphne (its protecting patches dropped)."""
    yield from _behind_nginx(tmp_path, server_env(SWITCHYARD_SERVER_PATCHES="none"))


def _behind_nginx(tmp_path, env=None):
    if nginx.binary() is None:
        message = "nginx is not installed (apt-get install nginx)"
        if __import__("os").environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    web = [start_daphne(env), start_daphne(env)]
    listen = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(nginx.config(listen=listen, upstreams=[w.port for w in web], prefix=tmp_path))
    nginx.check(conf, tmp_path)
    log = _log_path("nginx")
    process = subprocess.Popen(
        nginx.command(conf, tmp_path), stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{listen}"
    proxy = Proc(process, url, listen, log)
    try:
        wait_http(url + "/healthz", proc=process)
        yield url, web
    finally:
        proxy.stop()
        for server in web:
            server.stop()


def test_streams_pass_through_unbuffered_and_both_processes_serve(
    behind_nginx, simulator, provision
):
    url, web = behind_nginx
    tenant = provision("acme", simulator.url)
    headers = {"authorization": f"Bearer {tenant.key}"}
    body = {"model": "sim-model", "input": "[[rate:5]] [[tokens:10]]", "stream": True}
    started = time.monotonic()
    first = None
    with httpx.stream(
        "POST", url + "/v1/responses", headers=headers, json=body, timeout=30
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if first is None and "response.output_text.delta" in line:
                first = time.monotonic() - started
    total = time.monotonic() - started
    # Ten tokens at five a second: two seconds in all; buffered, the first
    # delta would arrive with the last.
    assert first is not None and total >= 1.5 and first < total - 1.0

    # least_conn over two idle processes: sequential requests reach both.
    ids = set()
    for _ in range(8):
        answer = httpx.post(
            url + "/v1/responses",
            headers=headers,
            json={"model": "sim-model", "input": "hi"},
            timeout=30,
        )
        assert answer.status_code == 200
        ids.add(answer.headers["x-request-id"])
    assert len(ids) == 8
    served = [w.output().count("switchyard.requests") for w in web]
    assert all(served), served


def test_an_oversized_body_gets_the_api_envelope(behind_nginx):
    url, _ = behind_nginx
    answer = httpx.post(
        url + "/v1/responses",
        content=b"x" * (17 * 1024 * 1024),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 413
    assert json.loads(answer.text)["error"]["code"] == "request_too_large"


def test_with_stock_daphne_a_large_body_is_refused_before_it_is_read(behind_nginx_stock):
    """Stock daphne would read all 100 MB before any cap: nginx refuses the
    body from its Content-Length, with the API's envelope, when 64 KiB of it
    have been sent (nginx passes a body on only once it has all of it)."""
    url, _ = behind_nginx_stock
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(
            b"POST /v1/responses HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (100 * 1024 * 1024)
        )
        client.sendall(b"x" * 65536)
        answer = b""
        while b"request_too_large" not in answer and (chunk := client.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b'"code": "request_too_large"' in answer


# --------------------------------------------------------------------------- several hosts

MULTI_HOST = ROOT / "platform" / "nginx" / "switchyard-multi-host.conf"
SINGLE_HOST = ROOT / "platform" / "nginx" / "switchyard.conf"


def _shared_part(text: str) -> str:
    """The file without its header comment, its upstream list and the two
    locations that differ on a load balancer of its own."""
    (upstream,) = nginx._blocks(text, r"upstream switchyard_web")
    rest = text[text.index(upstream) + len(upstream) :]
    for location in ("location /static/", "location = /metrics"):
        start = rest.index(location)
        comment = rest.rindex("\n\n", 0, start)
        rest = rest[:comment] + rest[nginx._block(rest, start) :]
    return rest.strip()


def test_the_multi_host_file_differs_from_the_single_host_one_only_where_it_must():
    assert _shared_part(MULTI_HOST.read_text()) == _shared_part(SINGLE_HOST.read_text())
    text = MULTI_HOST.read_text()
    (upstream,) = nginx._blocks(text, r"upstream switchyard_web")
    servers = [
        line.split()[1] for line in upstream.splitlines() if line.strip().startswith("server ")
    ]
    hosts = {server.rsplit(":", 1)[0] for server in servers}
    assert len(hosts) >= 2 and "127.0.0.1" not in hosts, servers
    assert "least_conn;" in upstream and all(
        "max_fails=" in line for line in upstream.splitlines() if " server " in line
    )
    # A load balancer on a host of its own has no static files and must not
    # answer a scrape for one random web process.
    https = next(b for b in nginx._blocks(text, "server") if "ssl_certificate" in b)
    static = https[https.index("location /static/") :]
    static = static[: nginx._block(static, 0)]
    assert "proxy_pass http://switchyard_web;" in static
    assert not re.search(r"\b(alias|root)\b", static), static
    metrics = https[https.index("location = /metrics") :]
    assert "return 404;" in metrics[: nginx._block(metrics, 0)]


def _certificate(directory) -> tuple[str, str]:
    """A self-signed certificate for nginx -t, which opens the files it names."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "switchyard.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def _main_conf(prefix, body: str) -> str:
    temp = prefix / "temp"
    temp.mkdir(parents=True, exist_ok=True)
    user = "user root;\n" if __import__("os").geteuid() == 0 else ""
    return (
        f"{user}worker_processes 1;\npid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} warn;\nevents {{ worker_connections 256; }}\n"
        f"http {{\n    access_log {prefix / 'access.log'};\n"
        f"    client_body_temp_path {temp / 'body'};\n    proxy_temp_path {temp / 'proxy'};\n"
        f"    fastcgi_temp_path {temp / 'fastcgi'};\n    uwsgi_temp_path {temp / 'uwsgi'};\n"
        f"    scgi_temp_path {temp / 'scgi'};\n{body}\n}}\n"
    )


def _nginx_or_skip() -> None:
    if nginx.binary() is None:
        message = "nginx is not installed (apt-get install nginx)"
        if __import__("os").environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.mark.parametrize("path", [SINGLE_HOST, MULTI_HOST], ids=lambda p: p.name)
def test_nginx_accepts_the_shipped_file_as_written(path, tmp_path):
    _nginx_or_skip()
    cert, key = _certificate(tmp_path)
    text = re.sub(r"(?m)^(\s*ssl_certificate)\s+\S+;", rf"\1 {cert};", path.read_text())
    text = re.sub(r"(?m)^(\s*ssl_certificate_key)\s+\S+;", rf"\1 {key};", text)
    conf = tmp_path / "nginx.conf"
    conf.write_text(_main_conf(tmp_path, text))
    done = subprocess.run([*nginx.command(conf, tmp_path), "-t"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_dead_host_in_the_upstreams_costs_no_request(tmp_path, simulator, provision):
    """The multi-host upstream as shipped, its hosts replaced by two live web
    processes and an address where nothing listens (a host that died): every
    request, POSTs included, is answered by a live one."""
    _nginx_or_skip()
    web = [start_daphne(), start_daphne()]
    dead = free_port()
    text = MULTI_HOST.read_text()
    (upstream,) = nginx._blocks(text, r"upstream switchyard_web")
    servers = "".join(
        f"    server 127.0.0.1:{port} max_fails=2 fail_timeout=10s;\n"
        for port in (dead, web[0].port, web[1].port)
    )
    live_upstream = re.sub(r"(?m)^\s*server \S+ [^\n]*\n", "", upstream).replace(
        "{\n", "{\n" + servers, 1
    )
    (connection_map,) = nginx._blocks(text, r"map \$http_upgrade \$switchyard_connection")
    https = next(b for b in nginx._blocks(text, "server") if "ssl_certificate" in b)
    listen = free_port()
    lines = [line for line in https.splitlines() if not nginx._DROPPED.match(line)]
    lines.insert(1, f"    listen 127.0.0.1:{listen};")
    conf = tmp_path / "nginx.conf"
    conf.write_text(_main_conf(tmp_path, f"{live_upstream}\n{connection_map}\n" + "\n".join(lines)))
    log = _log_path("nginx-multi")
    process = subprocess.Popen(
        nginx.command(conf, tmp_path), stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    proxy = Proc(process, f"http://127.0.0.1:{listen}", listen, log)
    try:
        wait_http(proxy.url + "/healthz", proc=process)
        tenant = provision("acme", simulator.url)
        headers = {"authorization": f"Bearer {tenant.key}"}
        for _ in range(6):
            answer = httpx.post(
                proxy.url + "/v1/responses",
                headers=headers,
                json={"model": "sim-model", "input": "hi"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert httpx.get(proxy.url + "/readyz", timeout=10).status_code == 200
        errors = (tmp_path / "error.log").read_text()
        assert f"127.0.0.1:{dead}" in errors  # nginx did try the dead one, and moved on
    finally:
        proxy.stop()
        for server in web:
            server.stop()
