"""Headers on every response Django itself serves (console, admin, sign-in,
API docs): the Content-Security-Policy, and ``no-store`` for anything shown to
a signed-in person. Static files never reach this middleware: WhiteNoise,
earlier in MIDDLEWARE, answers them itself and they stay cacheable."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import patch_cache_control
from django.utils.deprecation import MiddlewareMixin


class SecurityHeadersMiddleware(MiddlewareMixin):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        policy = settings.SWITCHYARD_CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            # Console pages and exports (the usage CSV) hold an organisation's
            # data: no browser or proxy cache may keep a copy.
            patch_cache_control(response, no_store=True)
        return response
