"""Invitations by email: a signed one-time link that lets a newcomer create an
account, or someone with an account join, in the role the inviting admin chose.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model, password_validation
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.audit import Actor, audit_record
from accounts.models import AuditEntry, Invitation, Membership, Organisation
from accounts.services.members import OWNER, owner_required
from accounts.validation import account_for_email, email_field, role_field

if TYPE_CHECKING:
    from django.contrib.auth.models import User

INVITE_SALT = "switchyard.console.invitation"
INVITE_DAYS = 7


def invitation_token(*, invitation: Invitation) -> str:
    """The signed token of an invitation link; it names the invitation only."""
    return signing.dumps({"i": str(invitation.id)}, salt=INVITE_SALT)


def invitation_from_token(*, token: str) -> Invitation | None:
    """The pending invitation a link names, or None (bad, used, expired, revoked)."""
    try:
        payload = signing.loads(token, salt=INVITE_SALT, max_age=timedelta(days=INVITE_DAYS))
    except signing.BadSignature:
        return None
    invitation_id = payload.get("i") if isinstance(payload, dict) else None
    if not isinstance(invitation_id, str):
        return None
    invitation = Invitation.objects.select_related("organisation").filter(id=invitation_id).first()
    if invitation is None or invitation.status != "pending":
        return None
    return invitation


@transaction.atomic
def invitation_create(
    *, organisation: Organisation, actor: Actor, email: str, role: str
) -> tuple[Invitation, str]:
    """Invite someone by email; returns the invitation and the token of its
    one-time link (sending it is the caller's business).

    Whether the address already has an account is not checked here: the
    answer would tell the inviting admin about accounts in other
    organisations. The link's page asks a newcomer to choose a password and
    someone with an account to sign in with it (``invitation_join``)."""
    email = email_field(email)
    role = role_field(role)
    if role == OWNER:
        owner_required(actor=actor, organisation=organisation)
    invitation = Invitation.objects.create(
        organisation=organisation,
        email=email,
        role=role,
        invited_by=actor.user,
        expires_at=timezone.now() + timedelta(days=INVITE_DAYS),
    )
    audit_record(
        organisation=organisation,
        actor=actor,
        action="member.invite",
        target=email,
        details={"role": role, "invitation_id": str(invitation.id)},
    )
    return invitation, invitation_token(invitation=invitation)


@transaction.atomic
def invitation_revoke(*, invitation: Invitation, actor: Actor) -> Invitation:
    """Withdraw a pending invitation; its link stops working."""
    if invitation.status != "pending":
        return invitation
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit_record(
        organisation=invitation.organisation,
        actor=actor,
        action="member.invite_revoke",
        target=invitation.email,
        details={"invitation_id": str(invitation.id)},
    )
    return invitation


@transaction.atomic
def invitation_accept(
    *,
    invitation: Invitation,
    password: str,
    source: AuditEntry.Source = AuditEntry.Source.CONSOLE,
) -> User:
    """Create the invited person's account and membership; the link is spent."""
    invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if invitation.status != "pending":
        raise ValidationError("This invitation has already been used or has expired.")
    User = get_user_model()
    if User.objects.filter(username__iexact=invitation.email).exists():
        raise ValidationError("An account with this email exists already: sign in instead.")
    probe = User(username=invitation.email, email=invitation.email)
    try:
        password_validation.validate_password(password, probe)
    except ValidationError as exc:
        raise ValidationError({"password": exc.messages}) from exc
    user = User.objects.create_user(
        username=invitation.email, email=invitation.email, password=password
    )
    Membership.objects.create(user=user, organisation=invitation.organisation, role=invitation.role)
    _invitation_spent(invitation=invitation, user=user, source=source, joined=True)
    return user


def _invitation_spent(
    *, invitation: Invitation, user: User, source: AuditEntry.Source, joined: bool
) -> None:
    """The link is used up; a new member's joining is audited."""
    invitation.accepted_at = timezone.now()
    invitation.save(update_fields=["accepted_at"])
    if joined:
        audit_record(
            organisation=invitation.organisation,
            actor=Actor(user=user, source=source),
            action="member.join",
            target=invitation.email,
            details={"role": invitation.role, "invitation_id": str(invitation.id)},
        )


def invitation_account(*, invitation: Invitation) -> User | None:
    """The existing account the invitation's address belongs to, if any."""
    return account_for_email(invitation.email)


@transaction.atomic
def invitation_join(
    *,
    invitation: Invitation,
    user: User,
    source: AuditEntry.Source = AuditEntry.Source.CONSOLE,
) -> Membership:
    """Add the signed-in owner of the invited address to the organisation;
    the link is spent."""
    invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if invitation.status != "pending":
        raise ValidationError("This invitation has already been used or has expired.")
    account = account_for_email(invitation.email)
    if account is None or account.pk != user.pk:
        raise ValidationError(f"This invitation is for {invitation.email}.")
    membership, created = Membership.objects.get_or_create(
        user=user, organisation=invitation.organisation, defaults={"role": invitation.role}
    )
    _invitation_spent(invitation=invitation, user=user, source=source, joined=created)
    return membership
