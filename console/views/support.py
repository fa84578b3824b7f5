"""Platform support: read-only search of request ids and usage across
organisations, and the usage rows the database refused."""

from __future__ import annotations

from typing import Any

import orjson
from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.access import is_support
from accounts.models import Organisation
from console.forms.common import set_choices
from console.forms.usage import STATUS_CHOICES, clean_request_id
from console.usage import usage_filter, usage_page
from console.views.base import page_of, query_without_page
from responses_api.access.objects import usage_for_support
from responses_api.usage.deadletters import deadletters_for


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


def _letter(letter, slugs: dict[int, str]) -> dict[str, Any]:
    """A dead letter as the page lists it: where and what it was, never the
    row's text (user agent, session, error message of the request)."""
    try:
        row = orjson.loads(letter.row)
    except orjson.JSONDecodeError:
        row = {}
    if not isinstance(row, dict):
        row = {}
    return {
        "created_at": letter.created_at,
        "request_id": letter.request_id,
        "organisation": slugs.get(letter.organisation_id, letter.organisation_id),
        "endpoint": f"{row.get('method', '')} {row.get('endpoint', '')}".strip(),
        "status": row.get("status"),
        "model": row.get("model", ""),
        "error": letter.error,
    }


def deadletters_page(request: HttpRequest) -> HttpResponse:
    """Every organisation's dead letters, for platform support staff only:
    they replay them (``manage.py usage_deadletters``); to anyone else the
    page does not exist."""
    if not is_support(request.user):
        raise Http404("Not found.")
    page = page_of(request, deadletters_for().order_by("-created_at", "-id"))
    ids = {letter.organisation_id for letter in page}
    slugs = dict(Organisation.objects.filter(pk__in=ids).values_list("pk", "slug"))
    letters = [_letter(letter, slugs) for letter in page]
    return render(request, "console/deadletters.html", {"page": page, "letters": letters})
