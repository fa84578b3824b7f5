"""Deprovisioning: a person leaves an organisation because their identity
provider says so (SCIM ``active: false`` or ``DELETE``, docs/admin/scim.md).

Their membership ends (through :func:`member_remove`, with its rules about
owners), their console sessions end, and the keys they created in the
organisation, inference and admin keys alike, are revoked, or handed to the
organisation's first owner when ``SWITCHYARD_SCIM_DEPROVISION_KEYS`` is
``transfer``. That choice is a platform setting, not an organisation's: it
decides whether a departed person's credentials keep working, which is the
platform operator's security posture (revoking is the safe default, and the
one a compliance review expects), and it leaves the organisation settings
that the console, the management API and its exports share unchanged. It is
read at each call, never at import. Every step writes its audit entry,
credited to the caller (the SCIM key).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from accounts.admin_keys import admin_key_revoke
from accounts.audit import Actor, audit_record
from accounts.models import AdminApiKey, ApiKey, Membership, Organisation
from accounts.services.api_keys import api_key_revoke
from accounts.services.members import member_remove
from accounts.signals import api_key_changed

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TRANSFER = "transfer"


@transaction.atomic
def member_deprovision(*, member: Membership, actor: Actor) -> None:
    """End ``member``'s membership, sessions and keys (module docstring).
    An owner is refused (``PermissionDenied``) unless an owner asks."""
    user, organisation = member.user, member.organisation
    member_remove(member=member, actor=actor)
    keys_of_leaver_settle(user=user, organisation=organisation, actor=actor)
    sessions_revoke(user=user, organisation=organisation, actor=actor)


def keys_of_leaver_settle(*, user: User, organisation: Organisation, actor: Actor) -> None:
    """Revoke, or transfer to the first owner, the active keys ``user``
    created in ``organisation``; with no owner left to take them, revoke."""
    api_keys = ApiKey.objects.filter(
        organisation=organisation, created_by=user, revoked_at__isnull=True, is_check=False
    )
    admin_keys = AdminApiKey.objects.filter(
        organisation=organisation, created_by=user, revoked_at__isnull=True
    )
    heir = None
    if settings.SWITCHYARD_SCIM_DEPROVISION_KEYS == TRANSFER:
        heir = (
            Membership.objects.filter(organisation=organisation, role=Membership.Role.OWNER)
            .exclude(user=user)
            .select_related("user")
            .order_by("created_at", "pk")
            .first()
        )
    for api_key in api_keys:
        if heir is None:
            api_key_revoke(api_key=api_key, actor=actor)
        else:
            _transfer(api_key, heir=heir.user, actor=actor, action="api_key.transfer")
    for admin_key in admin_keys:
        if heir is None:
            admin_key_revoke(admin_key=admin_key, actor=actor)
        else:
            _transfer(admin_key, heir=heir.user, actor=actor, action="admin_key.transfer")


def _transfer(key: ApiKey | AdminApiKey, *, heir: User, actor: Actor, action: str) -> None:
    before = key.created_by.get_username() if key.created_by is not None else ""
    key.created_by = heir
    key.save(update_fields=["created_by"])
    if isinstance(key, ApiKey):
        api_key_changed.send(sender=ApiKey, key_hash=key.key_hash)
    audit_record(
        organisation=key.organisation,
        actor=actor,
        action=action,
        target=str(key),
        details={"key_id": str(key.id), "from": before, "to": heir.get_username()},
    )


def sessions_revoke(*, user: User, organisation: Organisation, actor: Actor) -> int:
    """Sign ``user`` out of the console everywhere; the number of sessions
    ended.

    Sessions are not indexed by user, so the live ones are read and decoded
    (one pass over the table, at a deprovisioning, not per request). Every
    session is ended, not only those showing ``organisation``: a session
    moves between the person's organisations with a click."""
    store_class = import_module(settings.SESSION_ENGINE).SessionStore
    if not hasattr(store_class, "get_model_class"):
        raise ImproperlyConfigured(
            f"SESSION_ENGINE {settings.SESSION_ENGINE} keeps no table of sessions: "
            "deprovisioning cannot find a person's sessions to end them."
        )
    store = store_class()
    rows = (
        store_class.get_model_class()
        .objects.filter(expire_date__gt=timezone.now())
        .values_list("session_key", "session_data")
    )
    user_id = str(user.pk)
    ended = [key for key, data in rows.iterator() if store.decode(data).get(SESSION_KEY) == user_id]
    for key in ended:
        store_class(session_key=key).delete()
    audit_record(
        organisation=organisation,
        actor=actor,
        action="member.sessions_revoke",
        target=user.get_username(),
        details={"sessions": len(ended)},
    )
    return len(ended)
