"""Writes to organisations, memberships, invitations and API keys.

The one write path for these records: the console, the REST API and the
management commands all call these functions, so every change is validated
the same way and leaves an audit entry. Bad input raises
:class:`~django.core.exceptions.ValidationError` keyed by field name; a rule
about who may do what raises :class:`~django.core.exceptions.PermissionDenied`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model, password_validation
from django.core import signing
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone

from accounts.audit import CLI, Actor, audit_record
from accounts.keys import generate_key, hash_key, visible_prefix
from accounts.limits import SPEND_FIELDS, audit_value, spend_limit_clean
from accounts.models import AdminApiKey, ApiKey, AuditEntry, Invitation, Membership, Organisation
from accounts.signals import api_key_changed, organisation_settings_changed
from accounts.validation import (
    Check,
    account_for_email,
    choice_field,
    email_field,
    expiry_field,
    fields_clean,
    list_field,
    optional_count,
    required_count,
    role_field,
    text_field,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

INVITE_SALT = "switchyard.console.invitation"
INVITE_DAYS = 7
OWNER = Membership.Role.OWNER


# --- Organisations ---------------------------------------------------------------


@transaction.atomic
def organisation_ensure(
    *, slug: str, name: str | None = None, actor: Actor = CLI
) -> tuple[Organisation, bool]:
    """Create the organisation, or rename it; idempotent, for provisioning."""
    try:
        validate_slug(slug)
    except ValidationError as exc:
        raise ValidationError({"slug": exc.messages}) from exc
    org, created = Organisation.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    if created:
        audit_record(organisation=org, actor=actor, action="organisation.create", target=org.name)
    elif name and org.name != name:
        before = org.name
        org.name = name
        org.save(update_fields=["name"])
        audit_record(
            organisation=org,
            actor=actor,
            action="organisation.settings",
            target=org.name,
            details={"changed": {"name": [before, name]}},
        )
    return org, created


# The settings a change may name, in the order the console shows them.
SETTINGS_CHECKS: dict[str, Check] = {
    "name": lambda field, value: text_field(
        value, field=field, message="The organisation needs a name."
    ),
    "retention_policy": lambda field, value: choice_field(
        value,
        field=field,
        choices=Organisation.Retention.values,
        message="Pick one of the retention policies.",
    ),
    "store_ttl_hours": required_count,
    "usage_retention_days": required_count,
    # Empty: no default limit for the organisation's keys.
    "default_rpm": optional_count,
    "default_tpm": optional_count,
    "default_concurrency": optional_count,
    **dict.fromkeys(SPEND_FIELDS, spend_limit_clean),
}
SETTINGS_FIELDS = tuple(SETTINGS_CHECKS)


@transaction.atomic
def organisation_settings_update(
    *, organisation: Organisation, actor: Actor, data: Mapping[str, object]
) -> Organisation:
    """Change some of the organisation's settings (only the keys given); a
    change that changes nothing writes nothing.

    Every key of the organisation carries its limits and retention in the
    API's cache, hence the signal."""
    clean = fields_clean(data, SETTINGS_CHECKS)
    organisation = Organisation.objects.select_for_update().get(pk=organisation.pk)
    changes = {
        field: [audit_value(getattr(organisation, field)), audit_value(value)]
        for field, value in clean.items()
        if getattr(organisation, field) != value
    }
    if not changes:
        return organisation
    for field in changes:
        setattr(organisation, field, clean[field])
    organisation.save(update_fields=list(changes))
    organisation_settings_changed.send(sender=Organisation, organisation_id=organisation.pk)
    audit_record(
        organisation=organisation,
        actor=actor,
        action="organisation.settings",
        target=organisation.name,
        details={"changed": changes},
    )
    return organisation


# --- Members ---------------------------------------------------------------------


def _require_owner(*, actor: Actor, organisation: Organisation) -> None:
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
        before = membership.role
        membership.role = role
        membership.save(update_fields=["role"])
        audit_record(
            organisation=organisation,
            actor=actor,
            action="member.role",
            target=email,
            details={"from": before, "to": role},
        )
    if password:
        audit_record(organisation=organisation, actor=actor, action="member.password", target=email)
    return membership, user_created


@transaction.atomic
def member_add(*, organisation: Organisation, actor: Actor, email: str, role: str) -> Membership:
    """Add a person who already has an account to the organisation."""
    email = email_field(email)
    role = role_field(role)
    if role == OWNER:
        _require_owner(actor=actor, organisation=organisation)
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
        _require_owner(actor=actor, organisation=organisation)
    if member.role == role:
        return member
    _keep_an_owner(member)
    before = member.role
    member.role = role
    member.save(update_fields=["role"])
    audit_record(
        organisation=organisation,
        actor=actor,
        action="member.role",
        target=member.user.get_username(),
        details={"from": before, "to": role},
    )
    return member


@transaction.atomic
def member_remove(*, member: Membership, actor: Actor) -> None:
    """Take a person out of the organisation (their account stays)."""
    organisation = member.organisation
    if member.role == OWNER:
        _require_owner(actor=actor, organisation=organisation)
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


# --- Invitations -----------------------------------------------------------------


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
        _require_owner(actor=actor, organisation=organisation)
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


# --- API keys --------------------------------------------------------------------


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
