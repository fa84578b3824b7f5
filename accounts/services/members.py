"""Who belongs to an organisation, with which role. The owner role has rules
of its own: only owners grant or remove it, and an organisation always keeps
one (invitations follow the same rule, see :mod:`.invitations`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from accounts.audit import CLI, Actor, audit_record
from accounts.models import Membership, Organisation
from accounts.validation import account_for_email, email_field, role_field

OWNER = Membership.Role.OWNER


def owner_required(*, actor: Actor, organisation: Organisation) -> None:
    """Only owners make, unmake or invite owners. The command line may; an
    admin key, whose role is at most ``admin``, may not."""
    if actor.user is None:
        if actor.admin_key is not None:
            raise PermissionDenied("Only an owner may grant or remove the owner role.")
        return
    role = (
        Membership.objects.filter(user=actor.user, organisation=organisation)
        .values_list("role", flat=True)
        .first()
    )
    if role != OWNER:
        raise PermissionDenied("Only an owner may grant or remove the owner role.")


def _keep_an_owner(member: Membership) -> None:
    others = (
        Membership.objects.filter(organisation_id=member.organisation_id, role=OWNER)
        .exclude(pk=member.pk)
        .exists()
    )
    if member.role == OWNER and not others:
        raise ValidationError(
            {"role": "An organisation always keeps an owner: make someone else owner first."}
        )


def _role_write(
    member: Membership, *, organisation: Organisation, actor: Actor, role: str, target: str
) -> None:
    """The one write of a new role, for provisioning and for the console and
    API alike (the rules about owners are the caller's)."""
    before = member.role
    member.role = role
    member.save(update_fields=["role"])
    audit_record(
        organisation=organisation,
        actor=actor,
        action="member.role",
        target=target,
        details={"from": before, "to": role},
    )


@transaction.atomic
def member_ensure(
    *,
    organisation: Organisation,
    email: str,
    role: str,
    password: str | None = None,
    actor: Actor = CLI,
) -> tuple[Membership, bool]:
    """Add a person to an organisation with ``role``, creating the user if
    needed; idempotent, for provisioning.

    Returns the membership and whether the user was created."""
    email = email_field(email)
    role = role_field(role)
    User = get_user_model()
    user, user_created = User.objects.get_or_create(username=email, defaults={"email": email})
    if password:
        user.set_password(password)
        user.save(update_fields=["password"])
    elif user_created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    membership = Membership.objects.filter(user=user, organisation=organisation).first()
    if membership is None:
        membership = Membership.objects.create(user=user, organisation=organisation, role=role)
        details: dict[str, Any] = {"role": role, "user_created": user_created}
        audit_record(
            organisation=organisation,
            actor=actor,
            action="member.add",
            target=email,
            details=details,
        )
    elif membership.role != role:
        _role_write(membership, organisation=organisation, actor=actor, role=role, target=email)
    if password:
        audit_record(organisation=organisation, actor=actor, action="member.password", target=email)
    return membership, user_created


@transaction.atomic
def member_add(*, organisation: Organisation, actor: Actor, email: str, role: str) -> Membership:
    """Add a person who already has an account to the organisation."""
    email = email_field(email)
    role = role_field(role)
    if role == OWNER:
        owner_required(actor=actor, organisation=organisation)
    user = account_for_email(email)
    if user is None:
        raise ValidationError({"email": f"No account uses {email}. Send an invitation instead."})
    if Membership.objects.filter(user=user, organisation=organisation).exists():
        raise ValidationError({"email": f"{email} is already a member."})
    added = Membership.objects.create(user=user, organisation=organisation, role=role)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="member.add",
        target=email,
        details={"role": role},
    )
    return added


@transaction.atomic
def member_role_set(*, member: Membership, actor: Actor, role: str) -> Membership:
    """Give a member another role; the organisation always keeps an owner."""
    role = role_field(role)
    organisation = member.organisation
    if OWNER in (role, member.role):
        owner_required(actor=actor, organisation=organisation)
    if member.role == role:
        return member
    _keep_an_owner(member)
    _role_write(
        member, organisation=organisation, actor=actor, role=role, target=member.user.get_username()
    )
    return member


@transaction.atomic
def member_remove(*, member: Membership, actor: Actor) -> None:
    """Take a person out of the organisation (their account stays)."""
    organisation = member.organisation
    if member.role == OWNER:
        owner_required(actor=actor, organisation=organisation)
    _keep_an_owner(member)
    name = member.user.get_username()
    role = member.role
    member.delete()
    audit_record(
        organisation=organisation,
        actor=actor,
        action="member.remove",
        target=name,
        details={"role": role},
    )
