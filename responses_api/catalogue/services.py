"""Writes to backends, models and deployments.

The one write path for these records: the console, the REST API and the
management commands all call these functions, so every change is validated
the same way, leaves an audit entry, and makes the API's catalogue cache
forget the organisation at once. Bad input raises
:class:`~django.core.exceptions.ValidationError` keyed by field name.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from decimal import Decimal
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.access import is_platform_staff
from accounts.audit import CLI, Actor, audit_record
from accounts.models import AuditEntry, Organisation
from accounts.validation import (
    FieldErrors,
    choice_field,
    count_field,
    flag_field,
    list_field,
    one_word,
    refuse_unknown,
    text_field,
    whole_field,
)
from responses_api.catalogue import catalog
from responses_api.catalogue.addresses import base_url_error
from responses_api.models import (
    DEFAULT_REASONING_LEVELS,
    REASONING_LEVELS,
    Backend,
    Deployment,
    ServedModel,
)
from responses_api.runtime.secrets import encrypt


def _forget(organisation_id: int | None) -> None:
    # A shared backend (no organisation) may serve every organisation.
    catalog.forget(organisation_id)


def _forget_deployed(model: ServedModel, backend: Backend) -> None:
    # Whether a backend's load is counted depends on how many backends each
    # model it serves has (``catalog.BackendEntry.counted``): a model on a
    # shared backend changes that for every organisation using it.
    shared = backend.organisation_id is None or (
        model.deployments.filter(backend__organisation__isnull=True).exists()
    )
    _forget(None if shared else model.organisation_id)


# --- Backends ----------------------------------------------------------------

BACKEND_FIELDS = (
    "name",
    "base_url",
    "dialect",
    "max_concurrency",
    "enabled",
    "extra_body",
    "allow_private",
)


def _backend_name_taken(
    *, organisation_id: int | None, backend_id: uuid.UUID | None, name: str
) -> bool:
    if organisation_id is None:
        same = Backend.objects.filter(organisation__isnull=True, name=name)
    else:
        same = Backend.objects.filter(organisation_id=organisation_id, name=name)
    if backend_id is not None:
        same = same.exclude(pk=backend_id)
    return same.exists()


def _may_allow_private(actor: Actor) -> bool:
    """Platform staff: the command line, or a staff member in the console.
    An organisation's admins (console or admin key) are not."""
    if actor.source == AuditEntry.Source.CLI and actor.user is None:
        return True
    return actor.admin_key is None and actor.user is not None and is_platform_staff(actor.user)


def _backend_clean(
    *,
    organisation_id: int | None,
    backend_id: uuid.UUID | None,
    values: dict[str, Any],
    check_address: bool = True,
) -> dict[str, Any]:
    """Check a backend's fields (all of them, as they would be saved). The
    address is looked up only when ``check_address``: a new backend, a new
    URL or a narrower policy."""
    errors = FieldErrors()
    message = "Give the backend a name of at most 100 characters."
    name = errors.check(
        lambda: text_field(
            values["name"], field="name", message=message, max_length=100, too_long=message
        ),
        "",
    )
    if name and _backend_name_taken(
        organisation_id=organisation_id, backend_id=backend_id, name=name
    ):
        errors.add("name", f"A backend named “{name}” exists already.")
    url = values["base_url"].strip().rstrip("/") if isinstance(values["base_url"], str) else ""
    allow_private = errors.check(
        lambda: flag_field(values["allow_private"], field="allow_private"), False
    )
    url_error = base_url_error(url, allow_private=allow_private if check_address else None)
    if url_error:
        errors.add("base_url", url_error)
    errors.check(
        lambda: choice_field(values["dialect"], field="dialect", choices=Backend.Dialect.values),
        None,
    )
    concurrency = values["max_concurrency"]
    # 0: no limit of Switchyard's own (the backend queues for itself).
    if not (concurrency == 0 and not isinstance(concurrency, bool)):
        errors.check(
            lambda: whole_field(
                concurrency,
                field="max_concurrency",
                message="A whole number of requests at once; 0 for no limit.",
            ),
            None,
        )
    errors.check(lambda: flag_field(values["enabled"], field="enabled"), None)
    if not isinstance(values["extra_body"], dict):
        errors.add("extra_body", "A JSON object.")
    errors.raise_any()
    return {**values, "name": name, "base_url": url}


def _upstream_key_apply(backend: Backend, upstream_key: str | None) -> str | None:
    """The upstream key is write-only: a value sets it, None removes it."""
    if upstream_key:
        backend.api_key_encrypted = encrypt(upstream_key)
        return "set"
    if upstream_key is None and backend.api_key_encrypted:
        backend.api_key_encrypted = ""
        return "cleared"
    return None


@transaction.atomic
def backend_create(
    *,
    organisation: Organisation | None,
    actor: Actor,
    name: str,
    base_url: str,
    dialect: str = Backend.Dialect.OPENAI,
    max_concurrency: int = 16,
    enabled: bool = True,
    upstream_key: str = "",
    extra_body: dict[str, Any] | None = None,
    allow_private: bool = False,
) -> Backend:
    """Add a backend to the organisation (None: a shared, platform backend).
    ``allow_private`` lets it sit on a private or link-local address; only
    platform staff may set it."""
    if allow_private and not _may_allow_private(actor):
        raise ValidationError({"allow_private": "Only platform staff may set this."})
    values = _backend_clean(
        organisation_id=organisation.pk if organisation else None,
        backend_id=None,
        values={
            "name": name,
            "base_url": base_url,
            "dialect": dialect,
            "max_concurrency": max_concurrency,
            "enabled": enabled,
            "extra_body": extra_body if extra_body is not None else {},
            "allow_private": allow_private,
        },
    )
    backend = Backend(organisation=organisation, **values)
    key_change = _upstream_key_apply(backend, upstream_key)
    backend.save()
    _forget(backend.organisation_id)
    details: dict[str, Any] = {"backend_id": str(backend.id)}
    details.update({f: values[f] for f in BACKEND_FIELDS if f != "extra_body"})
    if key_change:
        details["upstream_key"] = key_change
    audit_record(
        organisation=organisation,
        actor=actor,
        action="backend.create",
        target=backend.name,
        details=details,
    )
    return backend


@transaction.atomic
def backend_update(*, backend: Backend, actor: Actor, data: Mapping[str, Any]) -> Backend:
    """Change some of a backend's fields (only the keys given); a change
    that changes nothing writes nothing, audit entry included.

    ``upstream_key``: a value replaces the stored key, None removes it, an
    empty string (or no key) keeps it.

    ``allow_private`` is changed by platform staff only. A new URL given by
    anyone else drops the flag: staff allowed the address, not whatever
    address the backend is moved to."""
    refuse_unknown(data, (*BACKEND_FIELDS, "upstream_key"))
    current = {f: getattr(backend, f) for f in BACKEND_FIELDS}
    wanted = {f: data[f] for f in BACKEND_FIELDS if f in data}
    staff = _may_allow_private(actor)
    flag = current["allow_private"]
    if not staff and wanted.get("allow_private", flag) != flag:
        raise ValidationError({"allow_private": "Only platform staff may change this."})
    new_url = "base_url" in wanted and (
        str(wanted["base_url"]).strip().rstrip("/") != current["base_url"]
    )
    if new_url and not staff:
        wanted["allow_private"] = False
    narrower = current["allow_private"] and wanted.get("allow_private") is False
    values = _backend_clean(
        organisation_id=backend.organisation_id,
        backend_id=backend.pk,
        values={**current, **wanted},
        check_address=new_url or narrower,
    )
    changed = [f for f in BACKEND_FIELDS if values[f] != current[f]]
    for field in changed:
        setattr(backend, field, values[field])
    key_change = _upstream_key_apply(backend, data.get("upstream_key", ""))
    if not changed and not key_change:
        return backend
    backend.save()
    _forget(backend.organisation_id)
    details: dict[str, Any] = {"backend_id": str(backend.id), "changed": changed}
    if key_change:
        details["upstream_key"] = key_change
    audit_record(
        organisation=backend.organisation,
        actor=actor,
        action="backend.update",
        target=backend.name,
        details=details,
    )
    return backend


@transaction.atomic
def backend_delete(*, backend: Backend, actor: Actor) -> None:
    """Remove a backend; its deployments go with it, its usage rows stay."""
    organisation, name, backend_id = backend.organisation, backend.name, str(backend.id)
    backend.delete()
    _forget(organisation.pk if organisation else None)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="backend.delete",
        target=name,
        details={"backend_id": backend_id},
    )


@transaction.atomic
def backend_ensure(
    *,
    organisation: Organisation | None,
    name: str,
    base_url: str,
    api_key: str | None = None,
    dialect: str | None = None,
    max_concurrency: int | None = None,
    extra_body: dict[str, Any] | None = None,
    allow_private: bool | None = None,
    actor: Actor = CLI,
) -> tuple[Backend, bool]:
    """Create the backend, or update the fields given; idempotent, for
    provisioning. ``api_key`` None keeps the stored upstream key;
    ``allow_private`` None keeps the flag (off for a new backend)."""
    backend = Backend.objects.filter(organisation=organisation, name=name).first()
    if backend is None:
        created = backend_create(
            organisation=organisation,
            actor=actor,
            name=name,
            base_url=base_url,
            dialect=dialect or Backend.Dialect.OPENAI,
            max_concurrency=16 if max_concurrency is None else max_concurrency,
            upstream_key=api_key or "",
            extra_body=extra_body,
            allow_private=bool(allow_private),
        )
        return created, True
    data: dict[str, Any] = {"base_url": base_url}
    for field, value in (
        ("dialect", dialect),
        ("max_concurrency", max_concurrency),
        ("extra_body", extra_body),
        ("upstream_key", api_key),
        ("allow_private", allow_private),
    ):
        if value is not None:
            data[field] = value
    return backend_update(backend=backend, actor=actor, data=data), False


# --- Models ------------------------------------------------------------------

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
    "first_token_timeout": None,
    "price_input": Decimal(0),
    "price_cached_input": Decimal(0),
    "price_output": Decimal(0),
}


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
        isinstance(temperature, int | float) and 0 <= temperature <= 2
    ):
        errors.add("temperature", "Between 0 and 2.")
    if top_p is not None and not (isinstance(top_p, int | float) and 0 < top_p <= 1):
        errors.add("top_p", "Greater than 0 and at most 1.")
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
    _forget(organisation.pk)
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
    _forget(model.organisation_id)
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
    _forget(organisation.pk)
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
