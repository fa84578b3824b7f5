"""Signing in to the console: the password form, single sign-on through the
identity provider (README, "Single sign-on"), and the page that says why a
sign-in was refused.

The two single sign-on views are ``mozilla-django-oidc``'s (state, nonce and
PKCE stay with the library), reading their settings from
``settings.SWITCHYARD_SSO``; both are a 404 while single sign-on is off.
"""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from mozilla_django_oidc.views import (  # type: ignore[import-untyped]
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from accounts.models import Invitation
from accounts.oidc import REFUSAL_SESSION_KEY, provider_setting
from console.forms.signin import LoginForm

logger = logging.getLogger(__name__)


def _provider_name() -> str:
    sso = settings.SWITCHYARD_SSO
    return sso.provider_name if sso is not None else ""


def sso_refused(request: HttpRequest, reason: str, *, status: int) -> HttpResponse:
    context = {"reason": reason, "provider": _provider_name()}
    return render(request, "console/sso_refused.html", context, status=status)


def _unreachable(request: HttpRequest, exc: requests.RequestException) -> HttpResponse:
    # The exception names the provider's URL and what failed, never a secret
    # (the client secret travels in a request body, not in the URL).
    logger.warning("Single sign-on: the identity provider failed: %s", exc)
    reason = f"{_provider_name()} could not be reached. Try again in a moment."
    return sso_refused(request, reason, status=502)


class SignInView(LoginView):
    """The password form (unless ``SWITCHYARD_PASSWORD_LOGIN`` is off) and,
    when single sign-on is configured, its button."""

    template_name = "console/login.html"
    authentication_form = LoginForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_provider"] = _provider_name()
        context["password_login"] = settings.SWITCHYARD_PASSWORD_LOGIN
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.SWITCHYARD_PASSWORD_LOGIN:
            context = self.get_context_data(password_refused=True)
            return self.render_to_response(context, status=403)
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response


class SsoStartView(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """Sends the browser to the identity provider."""

    get_settings = staticmethod(provider_setting)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        if settings.SWITCHYARD_SSO is None:
            raise Http404("Single sign-on is not configured.")
        try:
            response: HttpResponseBase = super().get(request)
        except requests.RequestException as exc:
            return _unreachable(request, exc)
        return response


class SsoCallbackView(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """Where the identity provider sends the browser back: signs the person
    in, or shows why not."""

    get_settings = staticmethod(provider_setting)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        if settings.SWITCHYARD_SSO is None:
            raise Http404("Single sign-on is not configured.")
        try:
            response: HttpResponseBase = super().get(request)
        except requests.RequestException as exc:
            return _unreachable(request, exc)
        return response

    def login_failure(self) -> HttpResponse:
        request: HttpRequest = self.request
        reason = request.session.pop(REFUSAL_SESSION_KEY, None)
        if reason is None:
            error = request.GET.get("error")
            reason = (
                f"{_provider_name()} did not sign you in ({error})."
                if error
                else "The sign-in could not be completed. Start again from the sign-in page."
            )
        return sso_refused(request, reason, status=403)


def invitation_sso_page(request: HttpRequest, invitation: Invitation) -> HttpResponse:
    """An invitation for someone without an account while passwords are
    off: there is no password to choose; signing in with the provider
    accepts it (``accounts.oidc.sso_sign_in``)."""
    context = {"invitation": invitation, "sso_provider": _provider_name()}
    return render(request, "console/invitation_sso.html", context)
