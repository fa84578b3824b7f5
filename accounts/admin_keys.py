"""Admin API keys: the management API's credentials (``/api/v1/admin/``).

The one write path for them, like ``accounts.services`` for inference keys:
the console and ``manage.py create_admin_key`` create and revoke them here,
and each change leaves an audit entry. Only the hash of a key is stored; the
full key is returned once, by :func:`admin_key_create`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import cast

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.audit import CLI, Actor, audit_record
from accounts.keys import (
    ADMIN_VISIBLE_CHARS,
    generate_admin_key,
    hash_key,
    looks_like_admin_key,
)
from accounts.models import AdminApiKey, Organisation
from accounts.services.api_keys import key_revoke
from accounts.validation import all_errors, expiry_field, list_field, role_field, text_field

# ``last_used_at`` is written at most this often per key: a busy automation
# should not turn every read of the API into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _clean(
    *, name: object, role: object, expires_at: object, scopes: object
) -> tuple[str, str, list[str]]:
    text, chosen, _, granted = all_errors(
        lambda: text_field(name, field="name", message="Give the key a name."),
        lambda: role_field(role, roles=AdminApiKey.Role.values),
        lambda: expiry_field(expires_at),
        lambda: scopes_field(scopes),
    )
    return str(text), str(chosen), cast("list[str]", granted)


def scopes_field(value: object) -> list[str]:
    """What a key may do besides the management API (``AdminApiKey.Scope``),
    each once, sorted."""
    scopes = list_field(value, field="scopes", message="A list of scopes.")
    if any(scope not in AdminApiKey.Scope.values for scope in scopes):
        raise ValidationError(
            {"scopes": f"Scopes are among {', '.join(AdminApiKey.Scope.values)}."}
        )
    return sorted(set(scopes))


@transaction.atomic
def admin_key_create(
    *,
    organisation: Organisation,
    name: str,
    role: str = AdminApiKey.Role.VIEWER,
    actor: Actor = CLI,
    expires_at: datetime | None = None,
    scopes: Iterable[str] = (),
) -> tuple[AdminApiKey, str]:
    """Create an admin key; the full key is returned once and never stored.
    ``scopes``: ``["scim"]`` lets it provision people over SCIM too."""
    name, role, granted = _clean(name=name, role=role, expires_at=expires_at, scopes=list(scopes))
    raw = generate_admin_key()
    key = AdminApiKey.objects.create(
        organisation=organisation,
        name=name,
        role=role,
        created_by=actor.user,
        prefix=raw[:ADMIN_VISIBLE_CHARS],
        key_hash=hash_key(raw),
        expires_at=expires_at,
        scopes=granted,
    )
    audit_record(
        organisation=organisation,
        actor=actor,
        action="admin_key.create",
        target=f"{key.name} ({key.prefix}…)",
        details={
            "admin_key_id": str(key.id),
            "role": role,
            "scopes": granted,
            "expires_at": expires_at.isoformat() if expires_at else None,
        },
    )
    return key, raw


@transaction.atomic
def admin_key_revoke(*, admin_key: AdminApiKey, actor: Actor = CLI) -> AdminApiKey:
    """Revoke an admin key at once (the next request with it is a 401);
    revoking twice changes nothing."""
    key_revoke(key=admin_key, actor=actor, action="admin_key.revoke", id_name="admin_key_id")
    return admin_key


def admin_key_authenticate(raw: str | None) -> AdminApiKey | None:
    """The active admin key ``raw`` is, or None (malformed, unknown, revoked,
    expired: the caller answers each the same way).

    One indexed lookup of the key's hash, no cache: a revocation holds from
    the next request on, in every process."""
    if not raw or not looks_like_admin_key(raw):
        return None
    now = timezone.now()
    key = (
        AdminApiKey.objects.select_related("organisation")
        .filter(key_hash=hash_key(raw), revoked_at__isnull=True)
        .first()
    )
    if key is None or (key.expires_at is not None and key.expires_at <= now):
        return None
    if key.last_used_at is None or key.last_used_at < now - LAST_USED_RESOLUTION:
        AdminApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key
