"""A real OpenID Connect provider for the single sign-on tests:
``oidc-provider-mock`` (authlib under uvicorn) as its own process.

It signs ID tokens with RS256, serves discovery, a token and a userinfo
endpoint, and lets any client id in. Its authorization page signs in
whichever subject is posted; the claims of each subject are set beforehand
with ``PUT /users/<sub>``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import urlsplit

import httpx

from tests.conftest import ROOT, Proc, _log_path, free_port, wait_http

CLIENT_ID = "switchyard-console"
CLIENT_SECRET = "console-client-secret"


def start_provider(*users: dict[str, object]) -> Proc:
    """The provider on a free port, with ``users`` (claims, each with its
    ``sub``) offered as buttons on its authorization page."""
    port = free_port()
    log = _log_path("oidc-provider")
    args = [arg for user in users for arg in ("--user-claims", json.dumps(user))]
    process = subprocess.Popen(
        [sys.executable, "-m", "oidc_provider_mock", "--port", str(port), *args],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/.well-known/openid-configuration", proc=process)
    return Proc(process, url, port, log)


def set_user(provider: Proc, sub: str, **claims: object) -> None:
    response = httpx.put(f"{provider.url}/users/{sub}", json=claims)
    response.raise_for_status()


def sso_env(provider: Proc, **extra: str) -> dict[str, str]:
    """The console's ``SWITCHYARD_OIDC_*`` for this provider."""
    return {
        "SWITCHYARD_OIDC_ISSUER": provider.url,
        "SWITCHYARD_OIDC_CLIENT_ID": CLIENT_ID,
        "SWITCHYARD_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "SWITCHYARD_OIDC_PROVIDER_NAME": "Acme ID",
        **extra,
    }


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")
