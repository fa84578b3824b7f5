"""Sign-in forms, for the console and for Django's admin: both refuse an
account or address locked out after too many failures."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.utils import timezone

from console.throttle import login_failure_record, login_lockout, login_success_record


class ThrottledLoginMixin:
    """Refuses sign-in while the account or the address is locked out
    (console/throttle.py), and counts each failure."""

    request: Any
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        ip = self.request.META.get("REMOTE_ADDR") if self.request is not None else None
        retry_at = login_lockout(username=username, ip=ip)
        if retry_at is not None:
            minutes = max(1, -(-int((retry_at - timezone.now()).total_seconds()) // 60))
            raise ValidationError(
                "Too many failed sign-in attempts. Try again after "
                f"{timezone.localtime(retry_at):%H:%M %Z} (in {minutes} min).",
                code="locked_out",
            )
        try:
            data = super().clean()  # type: ignore[misc]
        except ValidationError:
            login_failure_record(username=username, ip=ip)
            raise
        login_success_record(username=username)
        return data


class LoginForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class AdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass
