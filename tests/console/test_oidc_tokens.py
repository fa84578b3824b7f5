"""An ID token that cannot sign anyone in, at ``/console/oidc/callback/``:
expired, not yet valid, badly signed, for another client or issuer, not a
token, without its claims, or for another sign-in. Each is a 400 page and
one warning line without a traceback or the token.

The provider is a small one over HTTP on a thread of this process
(discovery, keys, token and userinfo endpoints) that returns whichever ID
token the test made: the real provider of ``test_oidc`` only issues good ones.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.test import Client

from config.logging import JsonFormatter, TextFormatter
from config.settings_sso import sign_in_backends, sso_config
from tests.console.oidc_provider import CLIENT_ID, CLIENT_SECRET
from tests.support import serve_in_thread

pytestmark = pytest.mark.django_db

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KID = "switchyard-test-key"


class Provider:
    """Serves ``token`` (a function of the sign-in's nonce) as the ID token
    of the next code exchange."""

    def __init__(self) -> None:
        self.token: Callable[[str], str | None] = lambda nonce: None
        self.nonce = ""
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if path == "/.well-known/openid-configuration":
                    self._json(provider.discovery())
                elif path == "/jwks":
                    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True)
                    self._json({"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]})
                elif path == "/userinfo":
                    self._json({"sub": "ann-sub", "email": "ann@acme.test", "email_verified": True})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer: dict[str, Any] = {"access_token": "access", "token_type": "Bearer"}
                id_token = provider.token(provider.nonce)
                if id_token is not None:
                    answer["id_token"] = id_token
                self._json(answer)

            def _json(self, value: object) -> None:
                body = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the records under test are the console's."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def discovery(self) -> dict[str, str]:
        return {
            "issuer": self.url,
            "authorization_endpoint": self.url + "/authorize",
            "token_endpoint": self.url + "/token",
            "userinfo_endpoint": self.url + "/userinfo",
            "jwks_uri": self.url + "/jwks",
        }


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    served = Provider()
    yield served
    served.server.shutdown()
    served.server.server_close()


@pytest.fixture
def configured(provider, settings, monkeypatch, people):
    for name, value in {
        "SWITCHYARD_OIDC_ISSUER": provider.url,
        "SWITCHYARD_OIDC_CLIENT_ID": CLIENT_ID,
        "SWITCHYARD_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "SWITCHYARD_OIDC_PROVIDER_NAME": "Acme ID",
        "SWITCHYARD_OIDC_DOMAINS": "acme.test=acme:developer",
    }.items():
        monkeypatch.setenv(name, value)
    settings.SWITCHYARD_SSO = sso_config()
    settings.AUTHENTICATION_BACKENDS = sign_in_backends(
        sso=settings.SWITCHYARD_SSO, password_login=True
    )
    return provider


def claims(provider: Provider, nonce: str, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    values = {
        "iss": provider.url,
        "sub": "ann-sub",
        "aud": CLIENT_ID,
        "exp": now + 300,
        "iat": now,
        "nonce": nonce,
        "email": "ann@acme.test",
        "email_verified": True,
    }
    values.update(changes)
    return {k: v for k, v in values.items() if v is not None}


def signed(payload: dict[str, Any], key: Any = KEY) -> str:
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": KID})


def callback(client: Client, provider: Provider) -> Any:
    """Starts a sign-in, as the browser would, and comes back to the
    callback with a code: the provider's next token answers its exchange."""
    start = client.get("/console/oidc/start/")
    assert start.status_code == 302
    query = parse_qs(urlsplit(start["Location"]).query)
    provider.nonce = query["nonce"][0]
    return client.get(f"/console/oidc/callback/?code=a-code&state={query['state'][0]}")


def test_a_valid_token_signs_in(configured):
    """The provider of these tests gives a token the console accepts: each
    refusal below is the token's doing."""
    configured.token = lambda nonce: signed(claims(configured, nonce))
    client = Client()
    answer = callback(client, configured)
    assert answer.status_code == 302 and answer["Location"] == "/console/"
    assert client.session.get("_auth_user_id")


HOUR = 3600

BAD_TOKENS: dict[str, Callable[[Provider, str], str | None]] = {
    "expired": lambda p, n: signed(
        claims(p, n, exp=int(time.time()) - 60, iat=int(time.time()) - HOUR)
    ),
    "not-yet-valid": lambda p, n: signed(claims(p, n, nbf=int(time.time()) + HOUR)),
    "issued-in-the-future": lambda p, n: signed(
        claims(p, n, iat=int(time.time()) + HOUR, exp=int(time.time()) + 2 * HOUR)
    ),
    "bad-signature": lambda p, n: signed(claims(p, n), key=OTHER_KEY),
    "another-audience": lambda p, n: signed(claims(p, n, aud="another-client")),
    "another-issuer": lambda p, n: signed(claims(p, n, iss="https://elsewhere.example")),
    "malformed": lambda p, n: "not.a-token",
    "no-token": lambda p, n: None,
    "without-expiry": lambda p, n: signed(claims(p, n, exp=None)),
    "without-subject": lambda p, n: signed(claims(p, n, sub=None)),
    "another-nonce": lambda p, n: signed(claims(p, "another-sign-in")),
}


@pytest.mark.parametrize("make", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
def test_a_bad_id_token_is_a_400_and_one_line_without_a_traceback(configured, make, caplog):
    tokens: list[str] = []

    def token(nonce: str) -> str | None:
        made = make(configured, nonce)
        tokens.extend([made] if made else [])
        return made

    configured.token = token
    client = Client()
    with caplog.at_level(logging.INFO):
        answer = callback(client, configured)
    assert answer.status_code == 400
    assert "Start again from the sign-in page" in answer.content.decode()
    assert not client.session.get("_auth_user_id")
    (record,) = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("Single sign-on callback refused: ")
    assert record.exc_info is None
    for formatter in (JsonFormatter(), TextFormatter()):
        line = formatter.format(record)
        assert "\n" not in line and "Traceback" not in line
        for made in tokens:
            for part in made.split("."):
                assert len(part) < 8 or part not in line
