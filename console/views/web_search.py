"""Web search: the provider the organisation binds to ``web_search``."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.access import is_platform_staff
from accounts.audit import Actor
from console.forms.common import errors_onto
from console.forms.web_search import WebSearchForm
from responses_api.catalogue.services.web_search import (
    web_search_bind,
    web_search_provider_of,
    web_search_unbind,
)


@require_http_methods(["GET", "POST"])
def web_search_edit(request: HttpRequest, membership) -> HttpResponse:
    provider = web_search_provider_of(membership.organisation)
    form = WebSearchForm(
        request.POST or None, instance=provider, staff=is_platform_staff(request.user)
    )
    if request.method == "POST" and form.is_valid():
        try:
            web_search_bind(
                organisation=membership.organisation,
                actor=Actor.console(membership.user),
                data=form.service_data(),
            )
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            messages.success(request, "Web search provider saved.")
            return redirect("console:web_search")
    context = {
        "form": form,
        "provider": provider,
        "has_api_key": bool(provider and provider.api_key_encrypted),
    }
    return render(request, "console/web_search.html", context)


@require_POST
def web_search_remove(request: HttpRequest, membership) -> HttpResponse:
    if web_search_unbind(
        organisation=membership.organisation, actor=Actor.console(membership.user)
    ):
        messages.success(request, "Web search provider removed: web_search is dropped again.")
    return redirect("console:web_search")
