"""The model catalogue: public ids, aliases, deployments, limits, prices."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.audit import Actor
from console.forms.catalogue import DeploymentForm, ServedModelForm
from console.forms.common import errors_onto
from console.views.base import amounts_initial
from responses_api.access.objects import (
    backends_for_member,
    get_backend_for_member,
    get_model_for_member,
    models_for_member,
)
from responses_api.catalogue.services.served_models import (
    deployment_remove,
    deployment_set,
    model_create,
    model_update,
)
from responses_api.checks.model_check import run_check
from responses_api.models import ModelCheck

log = logging.getLogger(__name__)

PRICE_FIELDS = ("price_input", "price_cached_input", "price_output")


def model_list(request: HttpRequest, membership) -> HttpResponse:
    models = models_for_member(membership=membership).prefetch_related("deployments__backend")
    return render(request, "console/models.html", {"models": models})


def _deployment_form(membership, data=None) -> DeploymentForm:
    backends = list(backends_for_member(membership=membership))
    return DeploymentForm(data, backends=backends, prefix="deploy")


@require_http_methods(["GET", "POST"])
def model_edit(request: HttpRequest, membership, model_id=None) -> HttpResponse:
    model = None
    if model_id is not None:
        model = get_model_for_member(
            membership=membership, model_id=model_id, manage=request.method == "POST"
        )
    form = ServedModelForm(
        request.POST or None,
        instance=model,
        initial=amounts_initial(model, PRICE_FIELDS),
        currency=membership.organisation.currency,
    )
    deploy_form = _deployment_form(membership, request.POST or None) if model is None else None
    if request.method == "POST":
        valid = form.is_valid() and (deploy_form is None or deploy_form.is_valid())
        if valid:
            try:
                saved = _model_save(membership, model, form, deploy_form)
            except ValidationError as exc:
                errors_onto(form, exc)
            else:
                messages.success(request, f"Model “{saved.public_id}” saved.")
                return redirect("console:model_edit", model_id=saved.id)
    context: dict[str, Any] = {"form": form, "model": model, "deploy_form": deploy_form}
    if model is not None:
        context["deployments"] = model.deployments.select_related("backend")
        context["add_deploy_form"] = _deployment_form(membership)
        context["last_check"] = (
            ModelCheck.objects.filter(model=model).select_related("backend").first()
        )
    return render(request, "console/model_form.html", context)


def _model_save(membership, model, form: ServedModelForm, deploy_form: DeploymentForm | None):
    actor = Actor.console(membership.user)
    if model is not None:
        return model_update(model=model, actor=actor, data=form.service_data())
    data = form.service_data()
    return model_create(
        organisation=membership.organisation,
        actor=actor,
        backend=deploy_form.cleaned_data["backend"] if deploy_form else None,
        upstream_name=deploy_form.cleaned_data["upstream_name"] if deploy_form else None,
        **data,
    )


@require_POST
def model_deploy(request: HttpRequest, membership, model_id) -> HttpResponse:
    model = get_model_for_member(membership=membership, model_id=model_id, manage=True)
    form = _deployment_form(membership, request.POST)
    if form.is_valid():
        try:
            deployment_set(
                model=model,
                backend=form.cleaned_data["backend"],
                actor=Actor.console(membership.user),
                upstream_name=form.cleaned_data["upstream_name"],
            )
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            backend = form.cleaned_data["backend"]
            messages.success(request, f"{backend.name} now serves this model.")
            return redirect("console:model_edit", model_id=model.id)
    errors = "; ".join(str(e) for errs in form.errors.values() for e in errs)
    messages.error(request, f"Not added: {errors}")
    return redirect("console:model_edit", model_id=model.id)


@require_POST
def model_undeploy(request: HttpRequest, membership, model_id, backend_id) -> HttpResponse:
    model = get_model_for_member(membership=membership, model_id=model_id, manage=True)
    backend = get_backend_for_member(membership=membership, backend_id=backend_id)
    deployment_remove(model=model, backend=backend, actor=Actor.console(membership.user))
    messages.success(request, f"{backend.name} no longer serves this model.")
    return redirect("console:model_edit", model_id=model.id)


@require_POST
def model_check_start(request: HttpRequest, membership, model_id) -> HttpResponse:
    """ "Test for Codex": the readiness check (``manage.py model_check``), run
    beside the request so that the page does not wait for the backend."""
    model = get_model_for_member(membership=membership, model_id=model_id, manage=True)
    thread = threading.Thread(
        target=_check_in_background,
        args=(membership.organisation.slug, model.public_id, Actor.console(membership.user)),
        name=f"model-check-{model.id}",
        daemon=True,
    )
    thread.start()
    messages.success(
        request, "The Codex readiness check is running; reload this page in a minute for results."
    )
    return redirect("console:model_edit", model_id=model.id)


def _check_in_background(org_slug: str, public_id: str, actor: Actor) -> None:
    try:
        run_check(org_slug, public_id, actor=actor)
    except Exception:
        log.exception("model check of %s in %s failed", public_id, org_slug)
    finally:
        close_old_connections()
