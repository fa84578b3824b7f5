"""SCIM groups (``ScimGroup``): a name and members, whose names decide the
members' roles by the sign-in rules (:mod:`.scim_users`). Every change of
members or of the name re-reads the role of each person it touches."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.audit import Actor, audit_record
from accounts.models import Organisation, ScimGroup, ScimUser
from accounts.services.scim_users import ScimConflict, membership_sync
from accounts.validation import text_field


def _display_name(value: object) -> str:
    return text_field(value, field="displayName", message="Give a displayName.")


def _name_free(*, organisation: Organisation, name: str, but: ScimGroup | None) -> None:
    taken = ScimGroup.objects.filter(organisation=organisation, display_name=name)
    if but is not None:
        taken = taken.exclude(pk=but.pk)
    if taken.exists():
        raise ScimConflict({"displayName": f"A group named {name} exists already."})


def _members(*, organisation: Organisation, ids: Iterable[str]) -> list[ScimUser]:
    """The organisation's SCIM users of ``ids``; an id that names none (or
    another organisation's) is refused like a malformed one."""
    wanted: set[uuid.UUID] = set()
    for value in ids:
        try:
            wanted.add(uuid.UUID(str(value)))
        except ValueError:
            raise ValidationError({"members": f"No such user: {value}."}) from None
    found = list(ScimUser.objects.filter(organisation=organisation, id__in=wanted))
    missing = wanted - {user.id for user in found}
    if missing:
        raise ValidationError({"members": f"No such user: {sorted(map(str, missing))[0]}."})
    return found


def _resync(users: Iterable[ScimUser], actor: Actor) -> None:
    for user in users:
        membership_sync(scim_user=user, actor=actor)


@transaction.atomic
def scim_group_create(
    *,
    organisation: Organisation,
    actor: Actor,
    display_name: object,
    external_id: str = "",
    member_ids: Iterable[str] = (),
) -> ScimGroup:
    name = _display_name(display_name)
    _name_free(organisation=organisation, name=name, but=None)
    members = _members(organisation=organisation, ids=member_ids)
    try:
        with transaction.atomic():
            group = ScimGroup.objects.create(
                organisation=organisation, display_name=name, external_id=external_id[:254]
            )
    except IntegrityError:
        raise ScimConflict({"displayName": f"A group named {name} exists already."}) from None
    group.members.set(members)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="scim.group_create",
        target=name,
        details={"scim_group_id": str(group.id), "members": sorted(u.user_name for u in members)},
    )
    _resync(members, actor)
    return group


@transaction.atomic
def scim_group_update(
    *,
    group: ScimGroup,
    actor: Actor,
    display_name: object = None,
    external_id: str | None = None,
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
    replace: Iterable[str] | None = None,
) -> ScimGroup:
    """Rename the group and change its members: ``replace`` (all of them),
    then ``add``, then ``remove`` (ids of SCIM users)."""
    organisation = group.organisation
    before = set(group.members.all())
    after = set(before)
    if replace is not None:
        after = set(_members(organisation=organisation, ids=replace))
    after |= set(_members(organisation=organisation, ids=add))
    removed_ids = {str(i).strip().lower() for i in remove}
    after = {user for user in after if str(user.id) not in removed_ids}
    details: dict[str, object] = {"scim_group_id": str(group.id)}
    renamed = False
    if display_name is not None:
        name = _display_name(display_name)
        if name != group.display_name:
            _name_free(organisation=organisation, name=name, but=group)
            details["renamed"] = [group.display_name, name]
            group.display_name = name
            renamed = True
    if external_id is not None and external_id[:254] != group.external_id:
        group.external_id = external_id[:254]
        details["external_id"] = group.external_id
    if after != before:
        details["added"] = sorted(u.user_name for u in after - before)
        details["removed"] = sorted(u.user_name for u in before - after)
        group.members.set(after)
    if len(details) == 1:
        return group
    group.updated_at = timezone.now()
    group.save()
    audit_record(
        organisation=organisation,
        actor=actor,
        action="scim.group_update",
        target=group.display_name,
        details=details,
    )
    _resync((before | after) if renamed else (before ^ after), actor)
    return group


@transaction.atomic
def scim_group_delete(*, group: ScimGroup, actor: Actor) -> None:
    """Delete the group; its members' roles are read again without it."""
    members = list(group.members.all())
    audit_record(
        organisation=group.organisation,
        actor=actor,
        action="scim.group_delete",
        target=group.display_name,
        details={"scim_group_id": str(group.id)},
    )
    group.delete()
    _resync(members, actor)
