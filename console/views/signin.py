"""Signing in to the console: the password form, single sign-on through the
identity provider (docs/admin/sso.md), and the page that says why a
sign-in was refused.

The two single sign-on views are ``mozilla-django-oidc``'s (state, nonce and
PKCE stay with the library), reading their settings from
``settings.SWITCHYARD_SSO``; both are a 404 while single sign-on is off.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.views import LoginView, LogoutView, PasswordChangeView
from django.core.exceptions import SuspiciousOperation
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
)
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils.log import log_response
from mozilla_django_oidc.views import (  # type: ignore[import-untyped]
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from accounts.models import Invitation
from accounts.oidc import REFUSAL_SESSION_KEY, provider_metadata, provider_setting
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


class _ProviderView:
    """What both ends of a sign-in at the identity provider share: its
    settings, a 404 while single sign-on is off, and a page saying so when
    the provider cannot be reached."""

    get_settings = staticmethod(provider_setting)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        if settings.SWITCHYARD_SSO is None:
            raise Http404("Single sign-on is not configured.")
        try:
            response: HttpResponseBase = super().get(request)  # type: ignore[misc]
        except requests.RequestException as exc:
            return _unreachable(request, exc)
        return response


class SsoStartView(_ProviderView, OIDCAuthenticationRequestView):  # type: ignore[misc]
    """Sends the browser to the identity provider."""


class SsoCallbackView(_ProviderView, OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """Where the identity provider sends the browser back: signs the person
    in, or shows why not."""

    def get(self, request: HttpRequest) -> HttpResponseBase:
        # A callback whose state or ID token does not check out (an expired
        # or forged token, a replayed link) is the browser's bad request:
        # a page and one warning line that says why, not Django's error
        # log with a traceback (its handling of SuspiciousOperation).
        try:
            return super().get(request)
        except SuspiciousOperation as refused:
            reason = "The sign-in could not be completed. Start again from the sign-in page."
            response = sso_refused(request, reason, status=400)
            log_response(
                "Single sign-on callback refused: %s", refused, response=response, request=request
            )
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


# --- passwords and signing out, for those who sign in with the provider -------------------


class PasswordChangePage(PasswordChangeView):
    """The console's password change, except for someone whose password
    cannot sign them in here (an account made by single sign-on, or
    passwords turned off): a page that says where their password is
    managed, and a refused form."""

    template_name = "console/password_change.html"
    success_url = reverse_lazy("console:password_done")

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        user = request.user
        if user.is_authenticated and (
            not user.has_usable_password() or not settings.SWITCHYARD_PASSWORD_LOGIN
        ):
            context = {"sso_provider": _provider_name()}
            status = 200 if request.method in ("GET", "HEAD") else 403
            return render(request, "console/password_sso.html", context, status=status)
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)
        return response


def admin_login(request: HttpRequest) -> HttpResponseBase:
    """``/admin/login/``: while passwords are off its form could never sign
    anyone in, so the console's sign-in (the provider's button) takes its
    place, coming back to the admin."""
    if settings.SWITCHYARD_PASSWORD_LOGIN:
        response: HttpResponseBase = admin.site.login(request)
        return response
    next_url = request.GET.get("next") or reverse("admin:index")
    return redirect(f"{reverse('console:login')}?{urlencode({'next': next_url})}")


class SignOutView(LogoutView):
    """Signs out of the console and, for someone who signed in with the
    provider, of the provider too when it says where (RP-initiated logout,
    its ``end_session_endpoint``): else its session would sign them in
    again without asking. That last step is a page that goes there, not a
    redirect: the console's ``form-action 'self'`` forbids the form's
    redirect to another origin."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get(ID_TOKEN_SESSION_KEY)
        response: HttpResponse = super().post(request, *args, **kwargs)
        ending = _end_session_url(request, id_token) if id_token else None
        if ending is None:
            return response
        context = {"end_session_url": ending, "provider": _provider_name()}
        return render(request, "console/signed_out.html", context)


# Where the library keeps the ID token (``OIDC_STORE_ID_TOKEN``).
ID_TOKEN_SESSION_KEY = "oidc_id_token"


def _end_session_url(request: HttpRequest, id_token: str) -> str | None:
    config = settings.SWITCHYARD_SSO
    if config is None or not config.issuer:
        return None
    try:
        endpoint = provider_metadata(config).get("end_session_endpoint")
    except requests.RequestException as exc:
        # Signed out here all the same; the provider's session stays.
        logger.warning("Single sign-on: no end_session_endpoint to sign out at: %s", exc)
        return None
    if not isinstance(endpoint, str) or not endpoint:
        return None
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": config.client_id,
            "post_logout_redirect_uri": request.build_absolute_uri(reverse("console:login")),
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
