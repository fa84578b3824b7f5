"""Platform support: read-only search of request ids and usage across
organisations."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.access import is_support
from accounts.models import Organisation
from console.forms.common import set_choices
from console.forms.usage import STATUS_CHOICES, clean_request_id
from console.usage import usage_filter, usage_page
from console.views.base import query_without_page
from responses_api.access.objects import usage_for_support


class SupportSearchForm(forms.Form):
    request_id = forms.CharField(required=False, label="Request id")
    organisation = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        organisations = [(o.slug, o.name) for o in Organisation.objects.all()]
        set_choices(self, "organisation", [("", "Every organisation"), *organisations])

    def clean_request_id(self) -> str:
        return clean_request_id(self.cleaned_data.get("request_id", ""))


def support_page(request: HttpRequest) -> HttpResponse:
    if not is_support(request.user):
        raise Http404("Not found.")
    usage = usage_for_support(user=request.user).select_related("organisation")
    form = SupportSearchForm(request.GET or None)
    if form.is_bound and form.is_valid():
        usage = usage_filter(usage, form.cleaned_data)
        if form.cleaned_data["organisation"]:
            usage = usage.filter(organisation__slug=form.cleaned_data["organisation"])
    elif form.is_bound:
        usage = usage.none()
    page = usage_page(usage, before=request.GET.get("before"), after=request.GET.get("after"))
    return render(
        request,
        "console/support.html",
        {"form": form, "page": page, "query": query_without_page(request)},
    )
