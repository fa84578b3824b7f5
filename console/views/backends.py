"""Backends: list, add, edit, test the connection, health history."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.access import is_platform_staff
from accounts.audit import Actor
from console.forms.catalogue import BackendForm
from console.forms.common import errors_onto
from console.health import backend_connection_test
from console.views.base import is_htmx
from responses_api.access.objects import backends_for_member, get_backend_for_member
from responses_api.catalogue.services.backends import backend_create, backend_update

HISTORY_ROWS = 50


def backend_list(request: HttpRequest, membership) -> HttpResponse:
    backends = backends_for_member(membership=membership).prefetch_related("deployments__model")
    return render(request, "console/backends.html", {"backends": backends})


def _detail_context(membership, backend) -> dict:
    deployments = backend.deployments.filter(
        model__organisation_id=membership.organisation_id
    ).select_related("model")
    return {
        "backend": backend,
        "deployments": deployments,
        "history": backend.health_checks.all()[:HISTORY_ROWS],
        "has_upstream_key": bool(backend.api_key_encrypted),
    }


def backend_detail(request: HttpRequest, membership, backend_id) -> HttpResponse:
    backend = get_backend_for_member(membership=membership, backend_id=backend_id)
    return render(request, "console/backend_detail.html", _detail_context(membership, backend))


@require_http_methods(["GET", "POST"])
def backend_edit(request: HttpRequest, membership, backend_id=None) -> HttpResponse:
    backend = None
    if backend_id is not None:
        backend = get_backend_for_member(membership=membership, backend_id=backend_id, manage=True)
    form = BackendForm(
        request.POST or None, instance=backend, staff=is_platform_staff(request.user)
    )
    if request.method == "POST" and form.is_valid():
        actor = Actor.console(membership.user)
        try:
            if backend is None:
                saved = backend_create(
                    organisation=membership.organisation, actor=actor, **form.service_data()
                )
            else:
                saved = backend_update(backend=backend, actor=actor, data=form.service_data())
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            messages.success(request, f"Backend “{saved.name}” saved.")
            return redirect("console:backend", backend_id=saved.id)
    return render(
        request,
        "console/backend_form.html",
        {
            "form": form,
            "backend": backend,
            "has_upstream_key": bool(backend and backend.api_key_encrypted),
        },
    )


@require_POST
def backend_check(request: HttpRequest, membership, backend_id) -> HttpResponse:
    backend = get_backend_for_member(membership=membership, backend_id=backend_id, manage=True)
    result, check = backend_connection_test(backend=backend, actor=Actor.console(membership.user))
    if is_htmx(request):
        # The outcome, the refreshed health and the history, without a reload.
        backend.refresh_from_db()
        context = {**_detail_context(membership, backend), "result": result, "check": check}
        return render(request, "console/_backend_live.html", context)
    if result.ok:
        messages.success(
            request,
            f"{backend.name} answered in {result.latency_ms:.0f} ms "
            f"with {len(result.models)} model(s).",
        )
    else:
        messages.error(request, f"{backend.name} did not answer: {result.error}")
    return redirect("console:backend", backend_id=backend.id)
