"""Admin API keys, for the management API: list, create (the key is shown
once), revoke. Owners and admins only."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.access import admin_keys_for_member, get_admin_key_for_member
from accounts.admin_keys import admin_key_create, admin_key_revoke
from accounts.audit import Actor
from console.forms.common import errors_onto
from console.forms.organisation import AdminKeyForm


def admin_key_list(request: HttpRequest, membership) -> HttpResponse:
    keys = admin_keys_for_member(membership=membership)
    return render(request, "console/admin_keys.html", {"keys": keys})


@require_http_methods(["GET", "POST"])
def admin_key_new(request: HttpRequest, membership) -> HttpResponse:
    form = AdminKeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            key, raw = admin_key_create(
                organisation=membership.organisation,
                actor=Actor.console(membership.user),
                **form.cleaned_data,
            )
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            response = render(
                request, "console/admin_key_created.html", {"key": key, "raw_key": raw}
            )
            # The full key is on this page only: never keep it in a cache.
            response["Cache-Control"] = "no-store"
            return response
    return render(request, "console/admin_key_form.html", {"form": form})


@require_http_methods(["GET", "POST"])
def admin_key_revoke_page(request: HttpRequest, membership, key_id) -> HttpResponse:
    key = get_admin_key_for_member(membership=membership, key_id=key_id)
    if request.method == "POST":
        admin_key_revoke(admin_key=key, actor=Actor.console(membership.user))
        messages.success(request, f"Admin key “{key.name}” ({key.prefix}…) is revoked.")
        return redirect("console:admin_keys")
    return render(request, "console/admin_key_revoke.html", {"key": key})
