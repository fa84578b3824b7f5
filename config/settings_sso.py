"""The console's sign-in settings: single sign-on with OpenID Connect and
whether passwords are still accepted (docs/admin/sso.md).

Read by ``config/settings.py``; kept apart so that the one place that turns
``SWITCHYARD_OIDC_*`` into a configuration, refusing what cannot work, reads
top to bottom.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from accounts.oidc_rules import SsoConfig, rules_parse
from config.declared.environment import read

# Discovery document field -> the variable that may set it explicitly.
ENDPOINTS = {
    "authorization_endpoint": "SWITCHYARD_OIDC_AUTHORIZATION_ENDPOINT",
    "token_endpoint": "SWITCHYARD_OIDC_TOKEN_ENDPOINT",
    "userinfo_endpoint": "SWITCHYARD_OIDC_USERINFO_ENDPOINT",
    "jwks_uri": "SWITCHYARD_OIDC_JWKS_URI",
}

PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"
SSO_BACKEND = "accounts.oidc.OidcBackend"


def sign_in() -> tuple[SsoConfig | None, bool, list[str]]:
    """``SWITCHYARD_SSO``, ``SWITCHYARD_PASSWORD_LOGIN`` and Django's
    ``AUTHENTICATION_BACKENDS``."""
    sso = sso_config()
    password_login = read("SWITCHYARD_PASSWORD_LOGIN")
    return sso, password_login, sign_in_backends(sso=sso, password_login=password_login)


def sso_config() -> SsoConfig | None:
    """Single sign-on, or None (off) unless a client id and an issuer (or
    every endpoint) are set."""
    issuer = read("SWITCHYARD_OIDC_ISSUER").strip().rstrip("/")
    client_id = read("SWITCHYARD_OIDC_CLIENT_ID").strip()
    endpoints = {field: read(name).strip() for field, name in ENDPOINTS.items()}
    if not client_id or not (issuer or all(endpoints.values())):
        return None
    return SsoConfig(
        issuer=issuer,
        client_id=client_id,
        client_secret=read("SWITCHYARD_OIDC_CLIENT_SECRET"),
        scopes=read("SWITCHYARD_OIDC_SCOPES"),
        sign_algo=read("SWITCHYARD_OIDC_SIGN_ALGO"),
        provider_name=read("SWITCHYARD_OIDC_PROVIDER_NAME"),
        endpoints=endpoints,
        domain_rules=rules_parse(
            read("SWITCHYARD_OIDC_DOMAINS"),
            variable="SWITCHYARD_OIDC_DOMAINS",
            lowercase_keys=True,
        ),
        group_rules=rules_parse(read("SWITCHYARD_OIDC_GROUPS"), variable="SWITCHYARD_OIDC_GROUPS"),
        groups_claim=read("SWITCHYARD_OIDC_GROUPS_CLAIM"),
        create_users=read("SWITCHYARD_OIDC_CREATE_USERS"),
        require_verified_email=read("SWITCHYARD_OIDC_REQUIRE_VERIFIED_EMAIL"),
        timeout=read("SWITCHYARD_OIDC_TIMEOUT"),
    )


def sign_in_backends(*, sso: SsoConfig | None, password_login: bool) -> list[str]:
    """Django's authentication backends: without the password one, no form
    anywhere (console or /admin/) accepts a password."""
    if not password_login and sso is None:
        raise ImproperlyConfigured(
            "SWITCHYARD_PASSWORD_LOGIN=false leaves no way to sign in: configure single "
            "sign-on (SWITCHYARD_OIDC_ISSUER and SWITCHYARD_OIDC_CLIENT_ID) or unset it."
        )
    backends = [PASSWORD_BACKEND] if password_login else []
    if sso is not None:
        backends.append(SSO_BACKEND)
    return backends
