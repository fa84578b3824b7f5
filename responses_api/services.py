"""Writes to backends, models and deployments."""

from __future__ import annotations

from django.db import transaction

from accounts.models import Organisation
from responses_api import catalog
from responses_api.models import Backend, Deployment, ServedModel
from responses_api.secrets import encrypt


@transaction.atomic
def backend_ensure(
    *,
    organisation: Organisation | None,
    name: str,
    base_url: str,
    api_key: str | None = None,
    dialect: str | None = None,
    max_concurrency: int | None = None,
    extra_body: dict | None = None,
) -> tuple[Backend, bool]:
    backend, created = Backend.objects.get_or_create(
        organisation=organisation, name=name, defaults={"base_url": base_url}
    )
    backend.base_url = base_url
    if api_key is not None:
        backend.api_key_encrypted = encrypt(api_key)
    if dialect is not None:
        backend.dialect = dialect
    if max_concurrency is not None:
        backend.max_concurrency = max_concurrency
    if extra_body is not None:
        backend.extra_body = extra_body
    backend.save()
    catalog.forget()
    return backend, created


@transaction.atomic
def model_ensure(
    *,
    organisation: Organisation,
    public_id: str,
    backend: Backend,
    upstream_name: str | None = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    **fields,
) -> tuple[ServedModel, bool]:
    """Create the model if needed and make ``backend`` serve it."""
    model, created = ServedModel.objects.get_or_create(
        organisation=organisation, public_id=public_id
    )
    changed = []
    for name, value in (
        ("context_window", context_window),
        ("max_output_tokens", max_output_tokens),
        *fields.items(),
    ):
        if value is not None:
            setattr(model, name, value)
            changed.append(name)
    if changed:
        model.save(update_fields=changed)
    Deployment.objects.update_or_create(
        model=model, backend=backend, defaults={"upstream_name": upstream_name or public_id}
    )
    catalog.forget(organisation.id)
    return model, created
