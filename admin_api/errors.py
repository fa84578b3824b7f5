"""The management API's errors, in the inference API's envelope
(``{"error": {"message", "type", "param", "code"}}``).

:func:`exception_handler` is the one place an exception becomes a response:
DRF's own (validation, authentication, throttling…), and the services'
Django ``ValidationError`` (keyed by field name, so ``param`` names the
field) and ``PermissionDenied``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.settings import api_settings

from responses_api.protocol.errors import ApiError

UNAUTHORIZED = (
    "Incorrect admin API key provided. The management API takes only admin keys "
    "(sy_admin_…); create one in the Switchyard console or with manage.py create_admin_key."
)
NOT_FOUND = "Not found: no such object in this organisation."

CODES: dict[type[exceptions.APIException], str] = {
    exceptions.NotAuthenticated: "invalid_api_key",
    exceptions.AuthenticationFailed: "invalid_api_key",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "rate_limit_exceeded",
    exceptions.ParseError: "invalid_json",
    exceptions.ValidationError: "invalid_request_error",
}


def first_error(detail: Any, path: str = "") -> tuple[str, str] | None:
    """The first message in DRF's error structure and the parameter it is
    about, as the client writes it: ``deployments[0].backend``."""
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            if key == api_settings.NON_FIELD_ERRORS_KEY:
                sub = path
            elif isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                sub = f"{path}[{key}]"
            else:
                sub = f"{path}.{key}" if path else str(key)
            found = first_error(value, sub)
            if found:
                return found
    elif isinstance(detail, list):
        for index, item in enumerate(detail):
            if isinstance(item, Mapping | list):
                found = first_error(item, f"{path}[{index}]")
                if found:
                    return found
            elif item:
                return path, str(item)
    elif detail:
        return path, str(detail)
    return None


def from_service(exc: DjangoValidationError, rename: Mapping[str, str] | None = None) -> Any:
    """A service's ValidationError as DRF's, its fields named as the API names them."""
    rename = rename or {}
    if hasattr(exc, "error_dict"):
        detail = {rename.get(field, field): msgs for field, msgs in exc.message_dict.items()}
        return exceptions.ValidationError(detail)
    return exceptions.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: exc.messages})


@contextmanager
def service_errors(**rename: str) -> Iterator[None]:
    """Around a service call: its validation errors become 400s naming the
    API's field (``rename``: the service's name → the API's)."""
    try:
        yield
    except DjangoValidationError as exc:
        raise from_service(exc, rename) from None


def body(status: int, message: str, *, code: str | None, param: str | None = None) -> Any:
    return ApiError(status, message, code=code, param=param or None).body()


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        exc = from_service(exc)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(NOT_FOUND)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    if not isinstance(exc, exceptions.APIException):
        return None
    status = exc.status_code
    code = next((c for kind, c in CODES.items() if isinstance(exc, kind)), "api_error")
    param = None
    headers: dict[str, str] = {}
    if isinstance(exc, exceptions.ValidationError):
        param, text = first_error(exc.detail) or ("", "Invalid request.")
        message = f"Invalid '{param}': {text}" if param else text
    elif isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        message = UNAUTHORIZED
        headers["WWW-Authenticate"] = 'Bearer realm="switchyard-admin"'
    elif isinstance(exc, exceptions.NotFound):
        message = NOT_FOUND
    else:
        message = str(exc.detail)
    if isinstance(exc, exceptions.Throttled):
        seconds = getattr(exc, "wait", None)
        wait = math.ceil(seconds) if seconds is not None else 1
        headers["Retry-After"] = str(max(wait, 1))
        message = f"Too many requests with this admin key: try again in {max(wait, 1)} s."
    return Response(body(status, message, code=code, param=param), status=status, headers=headers)


def not_found_view(request: HttpRequest, path: str = "") -> JsonResponse:
    """Every path under /api/v1/admin/ that no route serves."""
    from admin_api.views.base import request_id_header

    response = JsonResponse(
        body(404, f"Unknown request URL: {request.path}.", code="unknown_url"), status=404
    )
    request_id_header(response)
    return response
