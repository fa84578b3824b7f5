"""Single sign-on to the console with OpenID Connect (docs/admin/sso.md).

``mozilla-django-oidc`` runs the authorization code flow (state, nonce, PKCE,
the ID token's signature); this module decides who the identity is and where
it belongs. The person's e-mail address (verified by the provider) names the
account; the rules of ``settings.SWITCHYARD_SSO`` grant organisations and
roles, through the same member services as the console, with audit entries
whose source is single sign-on. An identity that maps to nothing is refused
with a reason the sign-in page shows.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

import jwt
import requests
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.db import transaction
from django.utils import timezone
from django.utils.functional import lazy
from mozilla_django_oidc.auth import OIDCAuthenticationBackend  # type: ignore[import-untyped]
from mozilla_django_oidc.utils import import_from_settings  # type: ignore[import-untyped]

from accounts.audit import Actor
from accounts.models import AuditEntry, Invitation, Membership, Organisation, ScimUser
from accounts.oidc_rules import ROLES, SsoConfig, claim_values, grants_for
from accounts.services.invitations import invitation_join
from accounts.services.members import member_add, member_ensure, member_role_set
from accounts.validation import account_for_email

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.http import HttpRequest

logger = logging.getLogger(__name__)

# Who makes the changes a sign-in brings: the provider's mapping.
SSO = Actor(user=None, source=AuditEntry.Source.SSO)

# The session key under which a refusal's reason waits for the page that
# shows it (the library's callback only learns that sign-in failed).
REFUSAL_SESSION_KEY = "sso_refusal"

DISCOVERY_SECONDS = 3600

# The library's endpoint settings -> the discovery document's fields.
ENDPOINT_SETTINGS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class IdentityRefused(PermissionDenied):
    """The provider vouched for someone this platform does not let in; the
    message says why, for the person who tried."""


class IdTokenRefused(SuspiciousOperation):
    """The ID token the provider returned cannot sign anyone in: expired, not
    yet valid, signed by another key, for another client, or not a token."""


# OpenID Connect Core 1.0, 2: an ID token without these is not one.
REQUIRED_CLAIMS = ("iss", "sub", "aud", "exp", "iat")


class ProviderUnavailable(requests.RequestException):
    """The issuer's discovery document could not be read, or was not one."""


def sso_config() -> SsoConfig:
    config: SsoConfig | None = settings.SWITCHYARD_SSO
    if config is None:
        raise ProviderUnavailable("Single sign-on is not configured.")
    return config


def provider_metadata(config: SsoConfig) -> dict[str, Any]:
    """The issuer's discovery document, cached for an hour in Django's cache
    (shared by the web processes when it is Redis)."""
    key = "oidc-discovery:" + hashlib.sha256(config.issuer.encode()).hexdigest()
    cached: dict[str, Any] | None = cache.get(key)
    if cached is not None:
        return cached
    url = config.issuer + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=config.timeout)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {exc}") from exc
    # OpenID Connect Discovery 1.0, section 4.3: the document must name the
    # issuer it was fetched from.
    if not isinstance(document, dict) or document.get("issuer") != config.issuer:
        raise ProviderUnavailable(f"{url} is not the discovery document of {config.issuer}")
    cache.set(key, document, DISCOVERY_SECONDS)
    return document


def _endpoint(field: str) -> str:
    config = sso_config()
    url = config.endpoints.get(field) or provider_metadata(config).get(field)
    if not isinstance(url, str) or not url:
        raise ProviderUnavailable(f"{config.issuer} names no {field}.")
    return url


_lazy_endpoint = lazy(_endpoint, str)


def provider_setting(name: str, *default: Any) -> Any:
    """``get_settings`` of the library's classes: its settings from
    ``SWITCHYARD_SSO``. Endpoints are lazy strings, resolved when a request
    to the provider is made: the backend is built for every password sign-in
    and every signed-in page too, which must not wait on the provider."""
    config = settings.SWITCHYARD_SSO
    if config is None:
        # Off: the views answer 404, yet the library reads its settings as
        # they are built.
        return getattr(settings, name, default[0] if default else None)
    if name in ENDPOINT_SETTINGS:
        return _lazy_endpoint(ENDPOINT_SETTINGS[name])
    values = {
        "OIDC_RP_CLIENT_ID": config.client_id,
        "OIDC_RP_CLIENT_SECRET": config.client_secret,
        "OIDC_RP_SCOPES": config.scopes,
        "OIDC_RP_SIGN_ALGO": config.sign_algo,
        "OIDC_TIMEOUT": config.timeout,
        "OIDC_USE_PKCE": True,
        # Kept in the session for the provider's sign-out (id_token_hint).
        "OIDC_STORE_ID_TOKEN": True,
        "OIDC_AUTHENTICATION_CALLBACK_URL": "console:oidc_callback",
    }
    if name in values:
        return values[name]
    return import_from_settings(name, *default)


def identity_email(claims: dict[str, Any], config: SsoConfig) -> str:
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise IdentityRefused(
            "The identity provider did not give an e-mail address for this account."
        )
    if config.require_verified_email and claims.get("email_verified") is not True:
        raise IdentityRefused(
            f"The identity provider has not verified {email}, so it cannot name an account here."
        )
    return email.strip().lower()


@transaction.atomic
def sso_sign_in(*, claims: dict[str, Any]) -> User:
    """The account of a signed-in identity, with the memberships its rules
    grant: missing ones added, lower roles raised (none removed or lowered:
    that stays with the organisation's admins); pending invitations to its
    address are accepted. The account is created on first sign-in unless
    ``create_users`` is off and no invitation awaits it."""
    config = sso_config()
    email = identity_email(claims, config)
    grants = grants_for(
        email=email,
        groups=claim_values(claims.get(config.groups_claim)),
        domain_rules=config.domain_rules,
        group_rules=config.group_rules,
    )
    organisations = {o.slug: o for o in Organisation.objects.filter(slug__in=grants)}
    for slug in grants.keys() - organisations.keys():
        logger.warning("Single sign-on rule names organisation %r, which does not exist.", slug)
    invitations = list(
        Invitation.objects.filter(
            email__iexact=email,
            accepted_at__isnull=True,
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
        ).select_related("organisation")
    )
    user = account_for_email(email)
    if user is not None:
        # Deprovisioned over SCIM: the provider, not a rule, has the last word.
        held_off = ScimUser.objects.filter(user=user, active=False)
        for slug in held_off.values_list("organisation__slug", flat=True):
            organisations.pop(slug, None)
    if user is not None and not user.is_active:
        raise IdentityRefused(f"The account {email} is deactivated here.")
    if user is None and not (config.create_users or invitations):
        raise IdentityRefused(f"No account here uses {email}. Ask an admin to invite you.")
    if not (organisations or invitations) and (user is None or not user.memberships.exists()):
        raise IdentityRefused(f"{email} is not allowed into any organisation here.")
    # The provider has verified the address an invitation was sent to: as
    # good as following its link.
    for invitation in invitations:
        if user is None:
            user = _grant(
                None, email=email, organisation=invitation.organisation, role=invitation.role
            )
        invitation_join(invitation=invitation, user=user, source=AuditEntry.Source.SSO)
    for slug, organisation in sorted(organisations.items()):
        user = _grant(user, email=email, organisation=organisation, role=grants[slug])
    assert user is not None  # an organisation was granted, or the account existed
    return user


def _grant(user: User | None, *, email: str, organisation: Organisation, role: str) -> User:
    if user is None:
        member, _created = member_ensure(
            organisation=organisation, email=email, role=role, actor=SSO
        )
        return member.user
    held = Membership.objects.filter(user=user, organisation=organisation).first()
    if held is None:
        member_add(organisation=organisation, actor=SSO, email=email, role=role)
    elif ROLES.index(role) > ROLES.index(held.role):
        member_role_set(member=held, actor=SSO, role=role)
    return user


class OidcBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    """The library's backend, deciding accounts by :func:`sso_sign_in`."""

    get_settings = staticmethod(provider_setting)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        # Only the callback view passes the nonce it kept: a password form
        # with ?code= in its URL must not start a token exchange.
        if "nonce" not in kwargs:
            return None
        user: User | None = super().authenticate(request, **kwargs)
        return user

    def retrieve_matching_jwk(self, token: str) -> jwt.PyJWK:
        """The library matches keys by ``kid``; OpenID Connect Core 1.0,
        10.1, requires one only when the provider publishes several keys,
        and some providers leave it out of the token then."""
        if "kid" in jwt.get_unverified_header(token):
            key: jwt.PyJWK = super().retrieve_matching_jwk(token)
            return key
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, timeout=sso_config().timeout)
        response.raise_for_status()
        keys = response.json().get("keys") or []
        if len(keys) != 1:
            raise SuspiciousOperation("The ID token names no key, and the provider has several.")
        return jwt.PyJWK(keys[0], algorithm=self.OIDC_RP_SIGN_ALGO)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library checks the signature and the nonce, PyJWT the times;
        an ID token must also carry the claims every ID token has and come
        from the issuer, for this client (OpenID Connect Core 1.0, 3.1.3.7).
        Every failure is :class:`IdTokenRefused`, which the callback answers
        with a 400."""
        try:
            payload: dict[str, Any] = super().verify_token(token, **kwargs)
        except jwt.PyJWTError as exc:
            # PyJWT's messages name the check that failed, never the token.
            raise IdTokenRefused(f"The ID token is not valid: {exc}") from None
        config = sso_config()
        if "nonce" in kwargs:
            absent = [claim for claim in REQUIRED_CLAIMS if claim not in payload]
            if absent:
                raise IdTokenRefused(f"The ID token lacks the claims {', '.join(absent)}.")
            audience = payload.get("aud")
            audiences = audience if isinstance(audience, list) else [audience]
            if config.client_id not in audiences:
                raise IdTokenRefused("The ID token was issued to another client.")
            if config.issuer and payload.get("iss") != config.issuer:
                raise IdTokenRefused("The ID token comes from another issuer.")
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User:
        claims = {**payload, **self.get_userinfo(access_token, id_token, payload)}
        try:
            return sso_sign_in(claims=claims)
        except IdentityRefused as refusal:
            self.request.session[REFUSAL_SESSION_KEY] = str(refusal.args[0])
            raise
