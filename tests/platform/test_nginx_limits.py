"""platform/nginx/ carries the web process's own limits, at their defaults,
so a deployment behind it stays bounded with daphne's protecting patches
dropped (``SWITCHYARD_SERVER_PATCHES``, docs/operations/limits.md).

The defaults are those a production process has (``show`` runs Django with
the production environment the manifests give it), not retyped here.
"""

from __future__ import annotations

import re
import sys

import pytest

from tests.conftest import ROOT
from tests.ops.test_settings import production_env, show

sys.path.insert(0, str(ROOT / "bench"))
import nginx  # noqa: E402

FILES = [ROOT / "platform" / "nginx" / n for n in ("switchyard.conf", "switchyard-multi-host.conf")]
LIMITS = (
    "SWITCHYARD_MAX_BODY_BYTES",
    "SWITCHYARD_HEADER_TIMEOUT_SECONDS",
    "SWITCHYARD_BODY_TIMEOUT_SECONDS",
    "SWITCHYARD_CLIENT_STALL_SECONDS",
    "SWITCHYARD_READ_TIMEOUT",
)
UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@pytest.fixture(scope="module")
def defaults() -> dict:
    return show(production_env(), *LIMITS)


def directives(text: str) -> dict[str, str]:
    """The HTTPS server's own directives (each once), as nginx reads them."""
    https = next(b for b in nginx._blocks(text, "server") if "ssl_certificate" in b)
    top = re.sub(r"#[^\n]*", "", https)
    found: dict[str, str] = {}
    depth = 0
    for line in top.splitlines():
        if depth == 1 and (match := re.match(r"\s*(\w+)\s+([^;{]+);", line)):
            assert match[1] not in found or match[1] in ("listen", "proxy_set_header", "allow")
            found.setdefault(match[1], match[2].strip())
        depth += line.count("{") - line.count("}")
    return found


def size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", value.lower()).groups()  # type: ignore[union-attr]
    return int(number) * UNITS[unit]


def seconds(value: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(s|m|h|d)?", value).groups()  # type: ignore[union-attr]
    return int(number) * SECONDS[unit or ""]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_nginx_carries_the_limits_of_the_web_process(path, defaults):
    found = directives(path.read_text())
    assert size(found["client_max_body_size"]) == defaults["SWITCHYARD_MAX_BODY_BYTES"]
    # nginx's header timeout is the app's: the whole request line and headers.
    assert seconds(found["client_header_timeout"]) == defaults["SWITCHYARD_HEADER_TIMEOUT_SECONDS"]
    # nginx has no deadline for a whole body: each pause between reads is
    # bounded by the app's, and nginx hands daphne the body only once whole.
    assert seconds(found["client_body_timeout"]) == defaults["SWITCHYARD_BODY_TIMEOUT_SECONDS"]
    assert found.get("proxy_request_buffering", "on") == "on"
    # A client that takes nothing of its answer is dropped after the app's stall.
    assert seconds(found["send_timeout"]) == defaults["SWITCHYARD_CLIENT_STALL_SECONDS"]
    # A silent backend is the app's to end (with the API's error), not nginx's.
    assert seconds(found["proxy_read_timeout"]) >= defaults["SWITCHYARD_READ_TIMEOUT"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_refusal_of_a_large_body_names_the_same_cap(path, defaults):
    text = path.read_text()
    (refusal,) = nginx._blocks(text, r"\s*location @body_too_large")
    cap = defaults["SWITCHYARD_MAX_BODY_BYTES"]
    assert f"at most {cap} bytes are accepted" in refusal


def test_the_benchmarks_rendering_keeps_the_limits(tmp_path, defaults):
    """``bench/nginx.py`` (and the live tests in ``test_nginx``) serve through
    a file rendered from the platform's: it holds the same limits."""
    rendered = nginx.config(listen=8080, upstreams=[8000], prefix=tmp_path)
    shipped = directives(FILES[0].read_text())
    server = next(b for b in nginx._blocks(rendered, r"\s*server") if "proxy_pass" in b)
    names = ("client_max_body_size", "client_header_timeout", "client_body_timeout")
    for name in (*names, "send_timeout", "proxy_read_timeout"):
        assert re.search(rf"(?m)^\s*{name}\s+{re.escape(shipped[name])};", server), name
