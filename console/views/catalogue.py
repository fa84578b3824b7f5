"""The model catalogue: public ids, aliases, deployments, limits, prices."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.access import (
    backends_for_member,
    get_backend_for_member,
    get_model_for_member,
    models_for_member,
)
from console.forms import DeploymentForm, ServedModelForm
from console.services import MODEL_FIELDS, deployment_remove, deployment_set, model_save


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
        request.POST or None, instance=model, organisation=membership.organisation
    )
    deploy_form = _deployment_form(membership, request.POST or None) if model is None else None
    if request.method == "POST":
        valid = form.is_valid() and (deploy_form is None or deploy_form.is_valid())
        if valid:
            data = {f: form.cleaned_data[f] for f in MODEL_FIELDS}
            saved = model_save(membership=membership, model=model, data=data)
            if deploy_form is not None:
                deployment_set(
                    membership=membership,
                    model=saved,
                    backend=deploy_form.cleaned_data["backend"],
                    upstream_name=deploy_form.cleaned_data["upstream_name"],
                )
            messages.success(request, f"Model “{saved.public_id}” saved.")
            return redirect("console:model_edit", model_id=saved.id)
    context = {"form": form, "model": model, "deploy_form": deploy_form}
    if model is not None:
        context["deployments"] = model.deployments.select_related("backend")
        context["add_deploy_form"] = _deployment_form(membership)
    return render(request, "console/model_form.html", context)


@require_POST
def model_deploy(request: HttpRequest, membership, model_id) -> HttpResponse:
    model = get_model_for_member(membership=membership, model_id=model_id, manage=True)
    form = _deployment_form(membership, request.POST)
    if form.is_valid():
        deployment_set(
            membership=membership,
            model=model,
            backend=form.cleaned_data["backend"],
            upstream_name=form.cleaned_data["upstream_name"],
        )
        messages.success(request, f"{form.cleaned_data['backend'].name} now serves this model.")
    else:
        errors = "; ".join(e for errs in form.errors.values() for e in errs)
        messages.error(request, f"Not added: {errors}")
    return redirect("console:model_edit", model_id=model.id)


@require_POST
def model_undeploy(request: HttpRequest, membership, model_id, backend_id) -> HttpResponse:
    model = get_model_for_member(membership=membership, model_id=model_id, manage=True)
    backend = get_backend_for_member(membership=membership, backend_id=backend_id)
    deployment_remove(membership=membership, model=model, backend=backend)
    messages.success(request, f"{backend.name} no longer serves this model.")
    return redirect("console:model_edit", model_id=model.id)
