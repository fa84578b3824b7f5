"""Inference API keys: creating one (the full key is shown once), changing
what it may do, and revoking it (:func:`key_revoke` serves the admin keys of
:mod:`accounts.admin_keys` too). A change or a revocation tells the API's key
cache, which would otherwise serve the key as it was until its entry is
reloaded."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.audit import CLI, Actor, audit_record
from accounts.keys import generate_key, hash_key, visible_prefix
from accounts.limits import spend_limit_clean
from accounts.models import AdminApiKey, ApiKey, Organisation
from accounts.signals import api_key_changed
from accounts.validation import (
    Check,
    expiry_field,
    fields_clean,
    list_field,
    optional_count,
    text_field,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _model_ids(field: str, value: object) -> list[str]:
    """Model ids as given (none: every model), each once, sorted."""
    models = list_field(value, field=field, message="A list of model ids.")
    if any(not isinstance(m, str) or not m or m != m.strip() for m in models):
        raise ValidationError({field: "A list of model ids."})
    return sorted(set(models))


KEY_CHECKS: dict[str, Check] = {
    "name": lambda field, value: text_field(value, field=field, message="Give the key a name."),
    "allowed_models": _model_ids,
    # Empty: the organisation's default.
    "rpm": optional_count,
    "tpm": optional_count,
    "concurrency": optional_count,
    "expires_at": lambda field, value: expiry_field(value, field=field),
    "monthly_budget": spend_limit_clean,
    "monthly_tokens": spend_limit_clean,
}


def _key_details(key: ApiKey) -> dict[str, Any]:
    return {
        "key_id": str(key.id),
        "allowed_models": key.allowed_models,
        "rpm": key.rpm,
        "tpm": key.tpm,
        "concurrency": key.concurrency,
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        "monthly_budget": str(key.monthly_budget) if key.monthly_budget is not None else None,
        "monthly_tokens": key.monthly_tokens,
    }


@transaction.atomic
def api_key_create(
    *,
    organisation: Organisation,
    name: str,
    actor: Actor = CLI,
    created_by: User | None = None,
    allowed_models: Iterable[str] = (),
    rpm: int | None = None,
    tpm: int | None = None,
    concurrency: int | None = None,
    expires_at: datetime | None = None,
    monthly_budget: Decimal | int | str | None = None,
    monthly_tokens: int | None = None,
    is_check: bool = False,
) -> tuple[ApiKey, str]:
    """Create a key; the full key is returned once and never stored.

    ``created_by`` is whose key it is (a developer may revoke their own);
    it defaults to the actor."""
    clean = fields_clean(
        {
            "name": name,
            "allowed_models": list(allowed_models),
            "rpm": rpm,
            "tpm": tpm,
            "concurrency": concurrency,
            "expires_at": expires_at,
            "monthly_budget": monthly_budget,
            "monthly_tokens": monthly_tokens,
        },
        KEY_CHECKS,
    )
    raw = generate_key()
    key = ApiKey.objects.create(
        organisation=organisation,
        created_by=created_by if created_by is not None else actor.user,
        prefix=visible_prefix(raw),
        key_hash=hash_key(raw),
        is_check=is_check,
        **clean,
    )
    audit_record(
        organisation=organisation,
        actor=actor,
        action="api_key.create",
        target=f"{key.name} ({key.prefix}…)",
        details=_key_details(key),
    )
    return key, raw


@transaction.atomic
def api_key_update(*, api_key: ApiKey, actor: Actor, data: Mapping[str, object]) -> ApiKey:
    """Rename a key or change what it may do (only the fields given); a
    change that changes nothing writes nothing."""
    clean = fields_clean(data, KEY_CHECKS)
    changed = [field for field, value in clean.items() if getattr(api_key, field) != value]
    if not changed:
        return api_key
    for field in changed:
        setattr(api_key, field, clean[field])
    api_key.save(update_fields=changed)
    api_key_changed.send(sender=ApiKey, key_hash=api_key.key_hash)
    audit_record(
        organisation=api_key.organisation,
        actor=actor,
        action="api_key.update",
        target=f"{api_key.name} ({api_key.prefix}…)",
        details={**_key_details(api_key), "changed": changed},
    )
    return api_key


def key_revoke(*, key: ApiKey | AdminApiKey, actor: Actor, action: str, id_name: str) -> bool:
    """Revoke either kind of key, with its audit entry ``action`` naming the
    key's id as ``id_name``; False, writing nothing, if it was revoked."""
    if not key.revoke():
        return False
    audit_record(
        organisation=key.organisation,
        actor=actor,
        action=action,
        target=str(key),
        details={id_name: str(key.id)},
    )
    return True


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, actor: Actor = CLI) -> ApiKey:
    """Revoke a key at once; revoking twice changes nothing."""
    key_revoke(key=api_key, actor=actor, action="api_key.revoke", id_name="key_id")
    # Also when it was revoked already: a cache may still hold it.
    api_key_changed.send(sender=ApiKey, key_hash=api_key.key_hash)
    return api_key
