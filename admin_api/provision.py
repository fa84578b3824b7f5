"""Declarative provisioning (``manage.py apply -f switchyard.yaml``).

The file declares organisations and, in each, backends, models (with their
deployments) and API keys by name. Every entry is validated by the
management API's own serializer and written by the same service functions,
so a file is accepted exactly when the same calls to the API would be.

Applying compares each entry with what exists and changes only what
differs, so a file applied twice changes nothing the second time. Fields an
entry leaves out keep their current values. Only with ``prune`` is anything
the file does not name removed: backends and models deleted, API keys
revoked, inside the organisations the file declares (an organisation itself
is never deleted). A dry run does all of it inside a transaction that is
rolled back: the plan it prints is the one a real run would carry out.

Upstream API keys are never written in the file: ``api_key_env: NAME``
names the environment variable holding one. MCP servers (``mcp_servers``,
``admin_api.provision_mcp``) take their secrets from the environment too,
and so does the ``web_search`` provider (``api_key_env``).

A backend may say ``allow_private: true`` (a private or link-local address,
``responses_api.catalogue.addresses``), which the management API refuses:
whoever runs ``apply`` on the server is platform staff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from rest_framework import serializers

from accounts.audit import CLI
from accounts.models import ApiKey, Organisation
from accounts.services.api_keys import api_key_create, api_key_revoke, api_key_update
from accounts.services.organisations import organisation_ensure, organisation_settings_update
from admin_api.errors import first_error, from_service
from admin_api.provision_mcp import (
    mcp_server_apply,
    mcp_servers_prune,
    web_search_apply,
    web_search_prune,
)
from admin_api.provision_plan import Plan, ProvisionError
from admin_api.serializers.accounts import ApiKeySerializer, OrganisationSerializer
from admin_api.serializers.catalogue import BackendSerializer, ModelSerializer
from admin_api.writes import backend_service_data, model_write
from responses_api.catalogue.services.backends import backend_create, backend_delete, backend_update
from responses_api.catalogue.services.served_models import model_delete
from responses_api.models import REASONING_LEVELS, Backend, ServedModel
from responses_api.runtime.secrets import decrypt

ORG_FIELDS = (
    "slug",
    "name",
    "settings",
    "backends",
    "models",
    "keys",
    "mcp_servers",
    "web_search",
)


def _fail(path: str, exc: serializers.ValidationError | Exception) -> ProvisionError:
    if isinstance(exc, serializers.ValidationError):
        param, text = first_error(exc.detail) or ("", "Invalid.")
        where = f"{path}.{param}" if param else path
        return ProvisionError(f"{where}: {text}")
    return ProvisionError(f"{path}: {exc}")


def _valid(serializer: serializers.Serializer, path: str) -> dict[str, Any]:
    if not serializer.is_valid():
        raise _fail(path, serializers.ValidationError(serializer.errors))
    return dict(serializer.validated_data)


def _entries(value: object, path: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProvisionError(f"{path}: a list of entries.")
    return list(value)


def _service(path: str, call: Any, /, **kwargs: Any) -> Any:
    """A service call whose validation error names the file's entry."""
    from django.core.exceptions import ValidationError

    try:
        return call(**kwargs)
    except ValidationError as exc:
        raise _fail(path, from_service(exc)) from None


def _same(current: Any, wanted: Any) -> bool:
    return bool(current == wanted)


def apply_document(
    document: object, *, environ: Mapping[str, str], prune: bool = False, dry_run: bool = False
) -> Plan:
    if not isinstance(document, dict) or set(document) - {"organisations"}:
        raise ProvisionError("The file holds one key, organisations: a list of organisations.")
    plan = Plan()
    with transaction.atomic():
        for index, entry in enumerate(_entries(document.get("organisations"), "organisations")):
            _organisation(entry, f"organisations[{index}]", plan, environ, prune)
        if dry_run:
            transaction.set_rollback(True)
            plan.secrets.clear()
    return plan


def _organisation(
    entry: dict[str, Any], path: str, plan: Plan, environ: Mapping[str, str], prune: bool
) -> None:
    unknown = sorted(set(entry) - set(ORG_FIELDS))
    if unknown:
        raise ProvisionError(f"{path}.{unknown[0]}: unknown field (use {', '.join(ORG_FIELDS)}).")
    slug = entry.get("slug")
    if not isinstance(slug, str) or not slug:
        raise ProvisionError(f"{path}.slug: every organisation needs a slug.")
    settings = entry.get("settings") or {}
    if not isinstance(settings, dict):
        raise ProvisionError(f"{path}.settings: a mapping of settings.")
    wanted = {**settings, **({"name": entry["name"]} if "name" in entry else {})}
    organisation = Organisation.objects.filter(slug=slug).first()
    created = organisation is None
    if organisation is None:
        organisation, _ = _service(
            path, organisation_ensure, slug=slug, name=wanted.get("name"), actor=CLI
        )
    clean = _valid(OrganisationSerializer(organisation, data=wanted, partial=True), path)
    changed = {k: v for k, v in clean.items() if not _same(getattr(organisation, k), v)}
    if changed:
        _service(
            path,
            organisation_settings_update,
            organisation=organisation,
            actor=CLI,
            data=changed,
        )
    if created:
        plan.add("create", "organisation", slug)
    else:
        plan.add("update" if changed else "unchanged", "organisation", slug, sorted(changed))
    context = {"organisation": organisation}
    backends = [
        _backend(e, f"{path}.backends[{i}]", plan, organisation, context, environ)
        for i, e in enumerate(_entries(entry.get("backends"), f"{path}.backends"))
    ]
    models = [
        _model(e, f"{path}.models[{i}]", plan, organisation, context)
        for i, e in enumerate(_entries(entry.get("models"), f"{path}.models"))
    ]
    keys = [
        _key(e, f"{path}.keys[{i}]", plan, organisation, context)
        for i, e in enumerate(_entries(entry.get("keys"), f"{path}.keys"))
    ]
    servers = [
        mcp_server_apply(e, f"{path}.mcp_servers[{i}]", plan, organisation, environ)
        for i, e in enumerate(_entries(entry.get("mcp_servers"), f"{path}.mcp_servers"))
    ]
    if entry.get("web_search") is not None:
        web_search_apply(entry["web_search"], f"{path}.web_search", plan, organisation, environ)
    if prune:
        _prune(plan, organisation, backends=backends, models=models, keys=keys)
        mcp_servers_prune(plan, organisation, kept=servers)
        if entry.get("web_search") is None:
            web_search_prune(plan, organisation)


def _backend(
    entry: dict[str, Any],
    path: str,
    plan: Plan,
    organisation: Organisation,
    context: dict[str, Any],
    environ: Mapping[str, str],
) -> str:
    data = dict(entry)
    for inline in ("upstream_api_key", "api_key"):
        if inline in data:
            raise ProvisionError(
                f"{path}.{inline}: never write a key in the file; put it in an environment "
                "variable and name that with api_key_env."
            )
    variable = data.pop("api_key_env", None)
    if variable is not None:
        if not isinstance(variable, str) or variable not in environ:
            raise ProvisionError(f"{path}.api_key_env: the variable {variable} is not set.")
        data["upstream_api_key"] = environ[variable]
    allow_private = data.pop("allow_private", None)
    if allow_private is not None and not isinstance(allow_private, bool):
        raise ProvisionError(f"{path}.allow_private: true or false.")
    clean = _valid(BackendSerializer(data=data, context=context), path)
    if allow_private is not None:
        clean["allow_private"] = allow_private
    name = clean["name"]
    label = f"{organisation.slug}/{name}"
    backend = Backend.objects.filter(organisation=organisation, name=name).first()
    if backend is None:
        values = backend_service_data(clean)
        _service(path, backend_create, organisation=organisation, actor=CLI, **values)
        plan.add("create", "backend", label)
        return name
    changed: dict[str, Any] = {}
    for key, value in clean.items():
        if key == "upstream_api_key":
            if decrypt(backend.api_key_encrypted) != (value or ""):
                changed[key] = value
        elif key == "base_url":
            if backend.base_url != value.strip().rstrip("/"):
                changed[key] = value
        elif not _same(getattr(backend, key), value):
            changed[key] = value
    if changed:
        _service(
            path,
            backend_update,
            backend=backend,
            actor=CLI,
            data=backend_service_data(changed),
        )
    plan.add("update" if changed else "unchanged", "backend", label, sorted(changed))
    return name


def _model(
    entry: dict[str, Any],
    path: str,
    plan: Plan,
    organisation: Organisation,
    context: dict[str, Any],
) -> str:
    data = dict(entry)
    deployments = _entries(data.get("deployments"), f"{path}.deployments")
    if "deployments" in data:
        # The file names backends; the API's serializer takes their ids.
        data["deployments"] = []
        for index, deployment in enumerate(deployments):
            named = deployment.get("backend")
            backend = Backend.objects.filter(organisation=organisation, name=named).first()
            if backend is None:
                raise ProvisionError(
                    f"{path}.deployments[{index}].backend: no backend named {named!r} "
                    f"in {organisation.slug}."
                )
            data["deployments"].append({**deployment, "backend": str(backend.id)})
    clean = _valid(ModelSerializer(data=data, context=context), path)
    label = f"{organisation.slug}/{clean['public_id']}"
    model = ServedModel.objects.filter(
        organisation=organisation, public_id=clean["public_id"]
    ).first()
    if model is None:
        _service(path, model_write, organisation=organisation, actor=CLI, model=None, data=clean)
        plan.add("create", "model", label)
        return str(clean["public_id"])
    changed: dict[str, Any] = {}
    for key, value in clean.items():
        if key == "deployments":
            current = set(model.deployments.values_list("backend_id", "upstream_name"))
            if current != {(d["backend_id"].pk, d["upstream_name"]) for d in value}:
                changed[key] = value
        elif key == "aliases":
            if model.aliases != list(dict.fromkeys(value)):
                changed[key] = value
        elif key == "reasoning_levels":
            if model.reasoning_levels != [level for level in REASONING_LEVELS if level in value]:
                changed[key] = value
        elif not _same(getattr(model, key), value):
            changed[key] = value
    if changed:
        _service(path, model_write, organisation=organisation, actor=CLI, model=model, data=changed)
    plan.add("update" if changed else "unchanged", "model", label, sorted(changed))
    return str(clean["public_id"])


def _key(
    entry: dict[str, Any],
    path: str,
    plan: Plan,
    organisation: Organisation,
    context: dict[str, Any],
) -> str:
    clean = _valid(ApiKeySerializer(data=entry, context=context), path)
    name = clean["name"]
    label = f"{organisation.slug}/{name}"
    key = ApiKey.objects.filter(
        organisation=organisation, name=name, revoked_at__isnull=True
    ).first()
    if key is None:
        created, raw = _service(path, api_key_create, organisation=organisation, actor=CLI, **clean)
        plan.add("create", "key", label)
        plan.secrets.append((f"API key '{name}' ({created.prefix}…) for {organisation.slug}", raw))
        return str(name)
    changed: dict[str, Any] = {}
    for field_name, value in clean.items():
        current = getattr(key, field_name)
        if field_name == "allowed_models":
            current, value = sorted(current), sorted(set(value))
        if not _same(current, value):
            changed[field_name] = clean[field_name]
    if changed:
        _service(path, api_key_update, api_key=key, actor=CLI, data=changed)
    plan.add("update" if changed else "unchanged", "key", label, sorted(changed))
    return str(name)


def _prune(
    plan: Plan,
    organisation: Organisation,
    *,
    backends: list[str],
    models: list[str],
    keys: list[str],
) -> None:
    slug = organisation.slug
    for model in ServedModel.objects.filter(organisation=organisation).exclude(
        public_id__in=models
    ):
        model_delete(model=model, actor=CLI)
        plan.add("delete", "model", f"{slug}/{model.public_id}")
    for backend in Backend.objects.filter(organisation=organisation).exclude(name__in=backends):
        backend_delete(backend=backend, actor=CLI)
        plan.add("delete", "backend", f"{slug}/{backend.name}")
    active = ApiKey.objects.filter(organisation=organisation, revoked_at__isnull=True)
    for key in active.exclude(name__in=keys):
        api_key_revoke(api_key=key, actor=CLI)
        plan.add("delete", "key", f"{slug}/{key.name} (revoked)")
