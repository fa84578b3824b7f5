"""nginx in front of several web processes, configured as production configures it.

``make bench BENCH_ARGS="--processes N"`` serves Switchyard from N daphne
processes behind nginx. The configuration is not written here: it is taken
from ``platform/nginx/switchyard.conf`` — its ``upstream`` block (least_conn,
keep-alive connections to the upstreams), its ``map`` of the Connection
header, and every directive of its HTTPS server (unbuffered proxying for
SSE, timeouts, body limits, the locations) — with three changes a benchmark
on loopback needs: the upstream list holds the bench's ports, the server
listens on plain HTTP (TLS would measure OpenSSL, not the proxying), and
the paths nginx writes to are in the run's directory. So a benchmark run
also proves that configuration: a stream that nginx buffered would show in
the time to first delta.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLATFORM_CONF = ROOT / "platform" / "nginx" / "switchyard.conf"


def binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )


def _block(text: str, start: int) -> int:
    """The index just past the ``}`` closing the block whose ``{`` is the
    first at or after ``start`` (quoted strings may hold braces)."""
    depth, i, quote = 0, text.index("{", start), ""
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            i = text.index("\n", i)
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced braces in the nginx configuration")


def _blocks(text: str, header: str) -> list[str]:
    found = []
    for match in re.finditer(rf"^{header}\s*\{{", text, flags=re.M):
        found.append(text[match.start() : _block(text, match.start())])
    return found


_DROPPED = re.compile(r"^\s*(listen|ssl_\w+|server_name|add_header Strict-Transport-Security)\b")


def config(*, listen: int, upstreams: list[int], prefix: Path) -> str:
    """The benchmark's nginx.conf, derived from the platform's."""
    text = PLATFORM_CONF.read_text()
    (upstream,) = _blocks(text, r"upstream switchyard_web")
    servers = "".join(
        f"    server 127.0.0.1:{p} max_fails=3 fail_timeout=10s;\n" for p in upstreams
    )
    upstream = re.sub(r"(?m)^\s*server 127\.0\.0\.1:\d+[^\n]*\n", "", upstream)
    upstream = upstream.replace("{\n", "{\n" + servers, 1)
    (connection_map,) = _blocks(text, r"map \$http_upgrade \$switchyard_connection")
    https = next(b for b in _blocks(text, "server") if "ssl_certificate" in b)
    # The static files are not part of what is measured.
    static = https.index("location /static/")
    https = https[:static] + https[_block(https, static) :]
    lines = [line for line in https.splitlines() if not _DROPPED.match(line)]
    lines.insert(1, f"    listen 127.0.0.1:{listen};")
    server = "\n".join(lines)
    temp = prefix / "temp"
    temp.mkdir(parents=True, exist_ok=True)
    user = "user root;\n" if os.geteuid() == 0 else ""
    return (
        f"# Generated from {PLATFORM_CONF.relative_to(ROOT)} by bench/nginx.py.\n"
        f"{user}worker_processes 1;\n"
        f"pid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} warn;\n"
        "events { worker_connections 8192; }\n"
        "http {\n"
        f"    access_log {prefix / 'access.log'};\n"
        f"    client_body_temp_path {temp / 'body'};\n"
        f"    proxy_temp_path {temp / 'proxy'};\n"
        f"    fastcgi_temp_path {temp / 'fastcgi'};\n"
        f"    uwsgi_temp_path {temp / 'uwsgi'};\n"
        f"    scgi_temp_path {temp / 'scgi'};\n"
        f"{upstream}\n{connection_map}\n{server}\n"
        "}\n"
    )


def command(conf: Path, prefix: Path) -> list[str]:
    nginx = binary()
    if nginx is None:
        raise SystemExit(
            "--processes needs nginx: apt-get install nginx (Debian's package, as in production)"
        )
    return [nginx, "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"]


def check(conf: Path, prefix: Path) -> None:
    """``nginx -t`` on the generated file: a configuration nginx refuses stops the run."""
    done = subprocess.run([*command(conf, prefix), "-t"], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"nginx refused {conf}:\n{done.stderr}")
