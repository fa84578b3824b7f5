"""Who calls the management API: an admin key, its role, and its rate.

``Authorization: Bearer sy_admin_…`` only: no session, so no CSRF either,
and an inference key (``sy_sk_…``) is refused like an unknown one (401).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from accounts.admin_keys import admin_key_authenticate
from accounts.models import AdminApiKey
from admin_api.errors import UNAUTHORIZED


@dataclass(frozen=True, slots=True)
class AdminPrincipal:
    """``request.user`` on the management API: the key, not a person."""

    admin_key: AdminApiKey
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_active: bool = True
    is_superuser: bool = False
    is_staff: bool = False

    def get_username(self) -> str:
        return f"admin key {self.admin_key.name}"


class AdminKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AdminPrincipal, AdminApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None  # NotAuthenticated: the same 401
        scheme, _, token = header.partition(" ")
        key = admin_key_authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if key is None:
            raise AuthenticationFailed(UNAUTHORIZED)
        return AdminPrincipal(key), key

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the key is missing or wrong.
        return 'Bearer realm="switchyard-admin"'


class AdminKeyRole(BasePermission):
    """``viewer`` keys read everything and write nothing."""

    message = "This admin key has the viewer role: it may read, not change anything."

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, AdminApiKey):
            return False
        return request.method in SAFE_METHODS or key.role == AdminApiKey.Role.ADMIN


class AdminKeyThrottle(SimpleRateThrottle):
    """Requests per admin key, counted in Django's cache (Redis in
    production, so every web process shares the count)."""

    scope = "admin_key"

    def get_rate(self) -> str:
        # Read per request, not at import: settings may change (tests do).
        return str(settings.SWITCHYARD_ADMIN_API_RATE)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        key = request.auth
        if not isinstance(key, AdminApiKey):
            return None
        return self.cache_format % {"scope": self.scope, "ident": key.pk}
