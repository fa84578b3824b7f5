"""API keys: list (with this month's spend), create (the key is shown
once), edit, revoke."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from accounts.access import api_keys_for_member, get_api_key_for_member, may_revoke
from accounts.audit import Actor
from accounts.services.api_keys import api_key_create, api_key_revoke, api_key_update
from console.forms.common import errors_onto
from console.forms.organisation import ApiKeyForm
from console.spend import keys_month
from console.views.base import amounts_initial
from responses_api.access.objects import models_for_member
from responses_api.usage.monthly import month_start


def key_list(request: HttpRequest, membership) -> HttpResponse:
    keys = list(api_keys_for_member(membership=membership))
    revocable = {key.pk for key in keys if may_revoke(membership=membership, api_key=key)}
    organisation = membership.organisation
    spend = keys_month(organisation, keys)
    for key in keys:
        key.month = spend[key.pk]  # type: ignore[attr-defined]
    context = {
        "keys": keys,
        "revocable": revocable,
        "month_start": month_start(timezone.now()),
        "warning": organisation.budget_warning_percent,
    }
    return render(request, "console/keys.html", context)


@require_http_methods(["GET", "POST"])
def key_create(request: HttpRequest, membership) -> HttpResponse:
    model_ids = list(models_for_member(membership=membership).values_list("public_id", flat=True))
    form = ApiKeyForm(
        request.POST or None, model_ids=model_ids, currency=membership.organisation.currency
    )
    if request.method == "POST" and form.is_valid():
        try:
            key, raw = api_key_create(
                organisation=membership.organisation,
                actor=Actor.console(membership.user),
                **form.cleaned_data,
            )
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            response = render(request, "console/key_created.html", {"key": key, "raw_key": raw})
            # The full key is on this page only: never keep it in a cache.
            response["Cache-Control"] = "no-store"
            return response
    return render(request, "console/key_form.html", {"form": form})


@require_http_methods(["GET", "POST"])
def key_edit(request: HttpRequest, membership, key_id) -> HttpResponse:
    key = get_api_key_for_member(membership=membership, key_id=key_id, edit=True)
    model_ids = list(models_for_member(membership=membership).values_list("public_id", flat=True))
    model_ids += [m for m in key.allowed_models if m not in model_ids]
    initial = {name: getattr(key, name) for name in ApiKeyForm.base_fields}
    initial.update(amounts_initial(key, ("monthly_budget",)))
    form = ApiKeyForm(
        request.POST or None,
        model_ids=model_ids,
        initial=initial,
        currency=membership.organisation.currency,
    )
    if request.method == "POST" and form.is_valid():
        data = {k: v for k, v in form.cleaned_data.items() if k in form.changed_data}
        try:
            api_key_update(api_key=key, actor=Actor.console(membership.user), data=data)
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            messages.success(request, f"Key “{key.name}” ({key.prefix}…) is saved.")
            return redirect("console:keys")
    return render(request, "console/key_form.html", {"form": form, "key": key})


@require_http_methods(["GET", "POST"])
def key_revoke(request: HttpRequest, membership, key_id) -> HttpResponse:
    key = get_api_key_for_member(membership=membership, key_id=key_id, revoke=True)
    if request.method == "POST":
        api_key_revoke(api_key=key, actor=Actor.console(membership.user))
        messages.success(request, f"Key “{key.name}” ({key.prefix}…) is revoked.")
        return redirect("console:keys")
    return render(request, "console/key_revoke.html", {"key": key})
