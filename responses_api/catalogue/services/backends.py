"""Backends: the upstream servers an organisation's models run on, or the
platform's shared ones. Only platform staff may let one sit on a private
address; the upstream key is write-only and stored encrypted."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.access import is_platform_staff
from accounts.audit import CLI, Actor, audit_record
from accounts.models import AuditEntry, Organisation
from accounts.validation import (
    FieldErrors,
    choice_field,
    flag_field,
    refuse_unknown,
    text_field,
    whole_field,
)
from responses_api.catalogue import catalog
from responses_api.catalogue.addresses import base_url_error
from responses_api.models import Backend
from responses_api.runtime.secrets import encrypt

BACKEND_FIELDS = (
    "name",
    "base_url",
    "dialect",
    "max_concurrency",
    "enabled",
    "extra_body",
    "allow_private",
    "kv_events_endpoint",
    "tokenizer_path",
)
# Platform staff's to set: an address the web processes connect to and a
# folder they read.
STAFF_FIELDS = ("allow_private", "kv_events_endpoint", "tokenizer_path")


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


def may_allow_private(actor: Actor) -> bool:
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
    precise = _precise_clean(values, errors)
    errors.raise_any()
    return {**values, "name": name, "base_url": url, **precise}


def _precise_clean(values: dict[str, Any], errors: FieldErrors) -> dict[str, str]:
    """The precise mode's two fields: both or neither, on a vLLM backend."""
    endpoint = values.get("kv_events_endpoint") or ""
    folder = values.get("tokenizer_path") or ""
    if not isinstance(endpoint, str) or not isinstance(folder, str):
        errors.add("kv_events_endpoint", "Text.")
        return {}
    endpoint, folder = endpoint.strip(), folder.strip()
    if endpoint and not (
        endpoint.startswith(("tcp://", "ipc://")) and len(endpoint) <= 300 and " " not in endpoint
    ):
        errors.add(
            "kv_events_endpoint",
            "A ZMQ address vLLM publishes on, tcp://HOST:PORT or ipc://PATH (at most 300 "
            "characters).",
        )
    if folder and not (folder.startswith("/") and len(folder) <= 500):
        errors.add("tokenizer_path", "An absolute path of at most 500 characters.")
    if bool(endpoint) != bool(folder):
        errors.add("tokenizer_path", "Precise mode needs both the events address and the folder.")
    if endpoint and values.get("dialect") != Backend.Dialect.VLLM:
        errors.add("kv_events_endpoint", "Only a backend of dialect vllm publishes KV events.")
    return {"kv_events_endpoint": endpoint, "tokenizer_path": folder}


def _upstream_key_apply(backend: Backend, upstream_key: str | None) -> str | None:
    """The upstream key is write-only: a value sets it, None removes it."""
    if upstream_key:
        backend.api_key_encrypted = encrypt(upstream_key)
        return "set"
    if upstream_key is None and backend.api_key_encrypted:
        backend.api_key_encrypted = ""
        return "cleared"
    return None


def _backend_save(
    backend: Backend, *, actor: Actor, action: str, details: dict[str, Any], key: str | None
) -> None:
    """Save, make the catalogue cache forget, and audit: the end of every
    change that changed something (what became of the upstream key, if
    anything, is named but never the key)."""
    backend.save()
    catalog.forget(backend.organisation_id)
    entry: dict[str, Any] = {"backend_id": str(backend.id), **details}
    if key:
        entry["upstream_key"] = key
    audit_record(
        organisation=backend.organisation,
        actor=actor,
        action=action,
        target=backend.name,
        details=entry,
    )


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
    kv_events_endpoint: str = "",
    tokenizer_path: str = "",
) -> Backend:
    """Add a backend to the organisation (None: a shared, platform backend).
    ``allow_private`` lets it sit on a private or link-local address; it and
    the precise mode's fields are platform staff's to set."""
    staff_values = {
        "allow_private": allow_private,
        "kv_events_endpoint": kv_events_endpoint,
        "tokenizer_path": tokenizer_path,
    }
    refused = [f for f, v in staff_values.items() if v]
    if refused and not may_allow_private(actor):
        raise ValidationError({f: "Only platform staff may set this." for f in refused})
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
            **staff_values,
        },
    )
    backend = Backend(organisation=organisation, **values)
    key_change = _upstream_key_apply(backend, upstream_key)
    fields = {f: values[f] for f in BACKEND_FIELDS if f != "extra_body"}
    _backend_save(backend, actor=actor, action="backend.create", details=fields, key=key_change)
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
    staff = may_allow_private(actor)
    refused = [f for f in STAFF_FIELDS if not staff and wanted.get(f, current[f]) != current[f]]
    if refused:
        raise ValidationError({f: "Only platform staff may change this." for f in refused})
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
    _backend_save(
        backend, actor=actor, action="backend.update", details={"changed": changed}, key=key_change
    )
    return backend


@transaction.atomic
def backend_delete(*, backend: Backend, actor: Actor) -> None:
    """Remove a backend; its deployments go with it, its usage rows stay."""
    organisation, name, backend_id = backend.organisation, backend.name, str(backend.id)
    backend.delete()
    # A shared backend (no organisation) may serve every organisation.
    catalog.forget(organisation.pk if organisation else None)
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
    kv_events_endpoint: str | None = None,
    tokenizer_path: str | None = None,
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
            kv_events_endpoint=kv_events_endpoint or "",
            tokenizer_path=tokenizer_path or "",
        )
        return created, True
    data: dict[str, Any] = {"base_url": base_url}
    for field, value in (
        ("dialect", dialect),
        ("max_concurrency", max_concurrency),
        ("extra_body", extra_body),
        ("upstream_key", api_key),
        ("allow_private", allow_private),
        ("kv_events_endpoint", kv_events_endpoint),
        ("tokenizer_path", tokenizer_path),
    ):
        if value is not None:
            data[field] = value
    return backend_update(backend=backend, actor=actor, data=data), False
