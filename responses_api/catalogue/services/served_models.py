"""The models an organisation offers under its own ids and aliases, their
limits, reasoning efforts and prices, and the deployments that say which
backends serve each one under which upstream name."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import transaction

from accounts.audit import CLI, Actor, audit_record
from accounts.models import Organisation
from accounts.validation import (
    FieldErrors,
    count_field,
    flag_field,
    list_field,
    one_word,
    refuse_unknown,
    text_field,
    whole_field,
)
from responses_api.catalogue import catalog
from responses_api.models import (
    DEFAULT_REASONING_LEVELS,
    MODEL_KINDS,
    REASONING_LEVELS,
    Backend,
    Deployment,
    ServedModel,
)
from responses_api.protocol.body import TEMPERATURE_MAX, TOP_P_MAX

MODEL_FIELDS = (
    "public_id",
    "aliases",
    "context_window",
    "max_output_tokens",
    "default_max_output_tokens",
    "temperature",
    "top_p",
    "supports_reasoning",
    "reasoning_levels",
    "default_reasoning_effort",
    "supports_vision",
    "kind",
    "first_token_timeout",
    "price_input",
    "price_cached_input",
    "price_output",
)
MODEL_DEFAULTS: dict[str, Any] = {
    "aliases": [],
    "context_window": None,
    "max_output_tokens": None,
    "default_max_output_tokens": None,
    "temperature": None,
    "top_p": None,
    "supports_reasoning": True,
    "reasoning_levels": [],
    "default_reasoning_effort": "",
    "supports_vision": False,
    "kind": "generate",
    "first_token_timeout": None,
    "price_input": Decimal(0),
    "price_cached_input": Decimal(0),
    "price_output": Decimal(0),
}


def _forget_deployed(model: ServedModel, backend: Backend) -> None:
    # Whether a backend's load is counted depends on how many backends each
    # model it serves has (``catalog.BackendEntry.counted``): a model on a
    # shared backend changes that for every organisation using it.
    shared = backend.organisation_id is None or (
        model.deployments.filter(backend__organisation__isnull=True).exists()
    )
    catalog.forget(None if shared else model.organisation_id)


# A day: past that a non-streamed request is better sent as a stream.
MAX_FIRST_TOKEN_TIMEOUT = 86_400


def _names_taken(*, organisation_id: int, model_id: uuid.UUID | None) -> set[str]:
    """Every public id and alias of the organisation's other models."""
    taken: set[str] = set()
    others = ServedModel.objects.filter(organisation_id=organisation_id)
    if model_id is not None:
        others = others.exclude(pk=model_id)
    for public_id, aliases in others.values_list("public_id", "aliases"):
        taken.add(public_id)
        taken.update(aliases or [])
    return taken


TOKEN_FIELDS = ("context_window", "max_output_tokens", "default_max_output_tokens")


def _model_numbers(values: dict[str, Any], errors: FieldErrors) -> None:
    for name in TOKEN_FIELDS:
        errors.check(partial(count_field, values[name], field=name), None)
    deadline = values["first_token_timeout"]
    if deadline is not None:
        errors.check(
            lambda: whole_field(
                deadline,
                field="first_token_timeout",
                message=f"Seconds, from 1 to {MAX_FIRST_TOKEN_TIMEOUT}.",
                high=MAX_FIRST_TOKEN_TIMEOUT,
            ),
            None,
        )
    temperature, top_p = values["temperature"], values["top_p"]
    if temperature is not None and not (
        isinstance(temperature, int | float) and 0 <= temperature <= TEMPERATURE_MAX
    ):
        errors.add("temperature", f"Between 0 and {TEMPERATURE_MAX}.")
    if top_p is not None and not (isinstance(top_p, int | float) and 0 < top_p <= TOP_P_MAX):
        errors.add("top_p", f"Greater than 0 and at most {TOP_P_MAX}.")
    window, cap = values["context_window"], values["max_output_tokens"]
    default = values["default_max_output_tokens"]
    if not any(name in errors for name in TOKEN_FIELDS):
        if cap and default and default > cap:
            errors.add("default_max_output_tokens", "Cannot exceed the max output tokens.")
        if window and cap and cap > window:
            errors.add("max_output_tokens", "Cannot exceed the context window.")
    for name in ("price_input", "price_cached_input", "price_output"):
        price = values[name]
        if not isinstance(price, int | float | Decimal) or isinstance(price, bool):
            errors.add(name, "A number.")
        elif price < 0:
            errors.add(name, "A price cannot be negative.")
    for name in ("supports_reasoning", "supports_vision"):
        errors.check(partial(flag_field, values[name], field=name), None)
    kinds = [kind for kind, _ in MODEL_KINDS]
    if values["kind"] not in kinds:
        errors.add("kind", f"One of {', '.join(kinds)}.")
    _model_reasoning(values, errors)


def _model_reasoning(values: dict[str, Any], errors: FieldErrors) -> None:
    choices = ", ".join(REASONING_LEVELS)
    levels = errors.check(
        lambda: list_field(
            values["reasoning_levels"],
            field="reasoning_levels",
            message="A list of reasoning efforts.",
        ),
        None,
    )
    if levels is None:
        return
    unknown = [level for level in levels if level not in REASONING_LEVELS]
    if unknown:
        errors.add("reasoning_levels", f"Unknown reasoning effort “{unknown[0]}”: use {choices}.")
        return
    # Kept in the order of REASONING_LEVELS, each once.
    values["reasoning_levels"] = [level for level in REASONING_LEVELS if level in levels]
    default = values["default_reasoning_effort"]
    if not isinstance(default, str):
        errors.add("default_reasoning_effort", "A reasoning effort.")
    elif default and default not in (values["reasoning_levels"] or DEFAULT_REASONING_LEVELS):
        errors.add("default_reasoning_effort", "The default must be one of the model's levels.")


def _model_clean(
    *, organisation_id: int, model_id: uuid.UUID | None, values: dict[str, Any]
) -> dict[str, Any]:
    """Check a model's fields (all of them, as they would be saved)."""
    errors = FieldErrors()
    taken = _names_taken(organisation_id=organisation_id, model_id=model_id)
    public_id = values["public_id"].strip() if isinstance(values["public_id"], str) else ""
    if not one_word(public_id) or len(public_id) > 200:
        errors.add("public_id", "A model id has no spaces.")
    elif public_id in taken:
        errors.add("public_id", f"“{public_id}” is already a model id or alias.")
    given: list[Any] = errors.check(
        lambda: list_field(values["aliases"], field="aliases", message="A list of names."), []
    )
    aliases: list[str] = list(dict.fromkeys(given))
    bad = [a for a in aliases if not one_word(a)]
    clash = sorted(taken & set(aliases))
    if bad:
        errors.add("aliases", f"An alias has no spaces: “{bad[0]}”.")
    elif clash:
        errors.add("aliases", f"“{clash[0]}” already names another model.")
    elif public_id in aliases:
        errors.add("aliases", "An alias cannot repeat the model id.")
    _model_numbers(values, errors)
    errors.raise_any()
    return {**values, "public_id": public_id, "aliases": aliases}


@transaction.atomic
def model_create(
    *,
    organisation: Organisation,
    actor: Actor,
    public_id: str,
    backend: Backend | None = None,
    upstream_name: str | None = None,
    **fields: Any,
) -> ServedModel:
    """Add a model to the organisation's catalogue, served by ``backend``
    (under ``upstream_name``) when one is given.

    ``fields``: any of :data:`MODEL_FIELDS`; the others take their defaults."""
    refuse_unknown(fields, MODEL_FIELDS)
    values = _model_clean(
        organisation_id=organisation.pk,
        model_id=None,
        values={**MODEL_DEFAULTS, **fields, "public_id": public_id},
    )
    model = ServedModel.objects.create(organisation=organisation, **values)
    catalog.forget(organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="model.create",
        target=model.public_id,
        details={"model_id": str(model.id)},
    )
    if backend is not None:
        deployment_set(
            model=model, backend=backend, actor=actor, upstream_name=upstream_name or public_id
        )
    return model


@transaction.atomic
def model_update(*, model: ServedModel, actor: Actor, data: Mapping[str, Any]) -> ServedModel:
    """Change some of a model's fields (only the keys given), aliases
    included; a change that changes nothing writes nothing."""
    refuse_unknown(data, MODEL_FIELDS)
    current = {f: getattr(model, f) for f in MODEL_FIELDS}
    values = _model_clean(
        organisation_id=model.organisation_id,
        model_id=model.pk,
        values={**current, **data},
    )
    changed = [f for f in MODEL_FIELDS if values[f] != current[f]]
    if not changed:
        return model
    for field in changed:
        setattr(model, field, values[field])
    model.save(update_fields=changed)
    catalog.forget(model.organisation_id)
    audit_record(
        organisation=model.organisation,
        actor=actor,
        action="model.update",
        target=model.public_id,
        details={"model_id": str(model.id), "changed": changed},
    )
    return model


@transaction.atomic
def model_delete(*, model: ServedModel, actor: Actor) -> None:
    """Remove a model from the catalogue; its usage rows keep its name."""
    organisation, public_id, model_id = model.organisation, model.public_id, str(model.id)
    model.delete()
    catalog.forget(organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="model.delete",
        target=public_id,
        details={"model_id": model_id},
    )


@transaction.atomic
def deployment_set(
    *, model: ServedModel, backend: Backend, actor: Actor, upstream_name: str
) -> Deployment:
    """Make ``backend`` serve ``model`` under ``upstream_name`` (its name there)."""
    errors = FieldErrors()
    if backend.organisation_id not in (None, model.organisation_id):
        errors.add("backend", "Pick one of the organisation's backends.")
    message = "Give the model's name on that backend."
    upstream_name = errors.check(
        lambda: text_field(upstream_name, field="upstream_name", message=message, too_long=message),
        "",
    )
    errors.raise_any()
    deployment, _ = Deployment.objects.update_or_create(
        model=model, backend=backend, defaults={"upstream_name": upstream_name}
    )
    _forget_deployed(model, backend)
    audit_record(
        organisation=model.organisation,
        actor=actor,
        action="model.deploy",
        target=model.public_id,
        details={"backend": backend.name, "upstream_name": upstream_name},
    )
    return deployment


@transaction.atomic
def deployment_remove(*, model: ServedModel, backend: Backend, actor: Actor) -> None:
    """``backend`` no longer serves ``model``."""
    deleted, _ = Deployment.objects.filter(model=model, backend=backend).delete()
    _forget_deployed(model, backend)
    if deleted:
        audit_record(
            organisation=model.organisation,
            actor=actor,
            action="model.undeploy",
            target=model.public_id,
            details={"backend": backend.name},
        )


@transaction.atomic
def model_ensure(
    *,
    organisation: Organisation,
    public_id: str,
    backend: Backend,
    upstream_name: str | None = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    actor: Actor = CLI,
    **fields: Any,
) -> tuple[ServedModel, bool]:
    """Create the model if needed, set the fields given, and make ``backend``
    serve it; idempotent, for provisioning."""
    given = {
        name: value
        for name, value in (
            ("context_window", context_window),
            ("max_output_tokens", max_output_tokens),
            *fields.items(),
        )
        if value is not None
    }
    model = ServedModel.objects.filter(organisation=organisation, public_id=public_id).first()
    created = model is None
    if model is None:
        model = model_create(organisation=organisation, actor=actor, public_id=public_id, **given)
    elif given:
        model = model_update(model=model, actor=actor, data=given)
    deployed = model.deployments.filter(backend=backend).values_list("upstream_name", flat=True)
    if list(deployed) != [upstream_name or public_id]:
        deployment_set(
            model=model, backend=backend, actor=actor, upstream_name=upstream_name or public_id
        )
    return model, created
