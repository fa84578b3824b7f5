"""Writes that take more than one service call, shared by the API's views
and ``manage.py apply``: each step is still the owning app's service
function (which audits it), all steps in one transaction."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts.audit import Actor
from accounts.models import Organisation
from responses_api.catalogue.services.served_models import (
    MODEL_FIELDS,
    deployment_remove,
    deployment_set,
    model_create,
    model_update,
)
from responses_api.models import Deployment, ServedModel

BACKEND_RENAME = {"upstream_key": "upstream_api_key"}


def backend_service_data(validated: dict[str, Any]) -> dict[str, Any]:
    """The serializer's fields as ``backend_create``/``backend_update`` name them."""
    data = dict(validated)
    if "upstream_api_key" in data:
        data["upstream_key"] = data.pop("upstream_api_key")
    return data


@transaction.atomic
def model_write(
    *,
    organisation: Organisation,
    actor: Actor,
    model: ServedModel | None,
    data: dict[str, Any],
) -> ServedModel:
    """Create or change a model and make its deployments exactly those given
    (when given), in one transaction: each step is its service function."""
    fields = {name: value for name, value in data.items() if name in MODEL_FIELDS}
    deployments = data.get("deployments")
    if model is None:
        model = model_create(organisation=organisation, actor=actor, **fields)
    elif fields:
        model = model_update(model=model, actor=actor, data=fields)
    if deployments is not None:
        wanted = {d["backend_id"].pk: d for d in deployments}
        for current in Deployment.objects.filter(model=model).select_related("backend"):
            if current.backend_id not in wanted:
                deployment_remove(model=model, backend=current.backend, actor=actor)
            elif current.upstream_name == wanted[current.backend_id]["upstream_name"]:
                wanted.pop(current.backend_id)
        for deployment in wanted.values():
            deployment_set(
                model=model,
                backend=deployment["backend_id"],
                actor=actor,
                upstream_name=deployment["upstream_name"],
            )
    return model
