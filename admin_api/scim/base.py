"""What every SCIM view shares: the admin key and its ``scim`` scope, SCIM's
media type in and out, and SCIM's error body for every refusal, DRF's own
(authentication, throttling, parsing) and the services' included."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.audit import Actor
from accounts.models import AdminApiKey, Organisation
from accounts.services.scim_users import ScimConflict
from admin_api.auth import AdminKeyAuthentication, AdminKeyRole, AdminKeyThrottle
from admin_api.parsers import JSONParser
from admin_api.scim.protocol import MEDIA_TYPE, ScimError
from admin_api.views.base import request_id_header

PREFIX = "/scim/v2"


class ScimRenderer(JSONRenderer):
    media_type = MEDIA_TYPE
    format = "scim"


class ScimJSONParser(JSONParser):
    media_type = MEDIA_TYPE


class AnyAccept(BaseContentNegotiation):
    """Always SCIM's JSON (RFC 7644, 3.1), whatever ``Accept`` asks: a
    provider that sends ``application/json`` still gets it."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        content_type = request.content_type.split(";")[0].strip().lower()
        return next((p for p in parsers if p.media_type == content_type), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        return next(iter(renderers)), MEDIA_TYPE


class ScimScope(BasePermission):
    message = "This admin key lacks the scim scope: create one with it for SCIM provisioning."

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        return isinstance(key, AdminApiKey) and key.has_scope(AdminApiKey.Scope.SCIM)


def scim_error(exc: Exception) -> ScimError | None:
    """``exc`` as SCIM's error, or None for what is no client's fault."""
    if isinstance(exc, ScimError):
        return exc
    if isinstance(exc, ScimConflict):
        return ScimError(409, "; ".join(exc.messages), "uniqueness")
    if isinstance(exc, DjangoValidationError):
        return ScimError(400, "; ".join(exc.messages), "invalidValue")
    if isinstance(exc, Http404 | exceptions.NotFound):
        return ScimError(404, "No such resource in this organisation.")
    if isinstance(exc, DjangoPermissionDenied):
        return ScimError(403, str(exc) or "Not allowed.")
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return ScimError(401, "A valid admin API key (Authorization: Bearer sy_admin_…) is needed.")
    if isinstance(exc, exceptions.ParseError):
        return ScimError(400, str(exc.detail), "invalidSyntax")
    if isinstance(exc, exceptions.APIException):
        return ScimError(exc.status_code, str(exc.detail))
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    error = scim_error(exc)
    if error is None:
        return None
    headers: dict[str, str] = {}
    if error.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="switchyard-scim"'
    if isinstance(exc, exceptions.Throttled):
        wait = getattr(exc, "wait", None)
        headers["Retry-After"] = str(max(math.ceil(wait or 1), 1))
    return Response(error.body(), status=error.status, headers=headers)


class ScimView(APIView):
    """Admin-key authentication, the ``scim`` scope, the key's role (a
    viewer key reads only) and its rate, as on the management API."""

    authentication_classes = [AdminKeyAuthentication]
    permission_classes = [ScimScope, AdminKeyRole]
    throttle_classes = [AdminKeyThrottle]
    parser_classes = [ScimJSONParser, JSONParser]
    renderer_classes = [ScimRenderer]
    content_negotiation_class = AnyAccept
    # Not part of the management API's OpenAPI document: SCIM has its own
    # discovery endpoints.
    schema = None

    def get_exception_handler(self) -> Any:
        return exception_handler

    @property
    def admin_key(self) -> AdminApiKey:
        assert isinstance(self.request.auth, AdminApiKey)
        return self.request.auth

    @property
    def organisation(self) -> Organisation:
        return self.admin_key.organisation

    @property
    def actor(self) -> Actor:
        return Actor.scim(self.admin_key)

    @property
    def base(self) -> str:
        """The absolute URL of ``/scim/v2``, for ``meta.location``."""
        return self.request.build_absolute_uri(PREFIX)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        request_id_header(response)
        return response
