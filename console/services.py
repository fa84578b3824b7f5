"""Writes the console makes. Each one records an audit entry and tells the
API's per-process caches (catalogue, key cache) about the change at once."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core import signing
from django.db import transaction
from django.utils import timezone

from accounts.access import require
from accounts.audit import audit_record
from accounts.models import ApiKey, Invitation, Membership, Organisation
from accounts.services import api_key_create, api_key_revoke
from responses_api import catalog
from responses_api.models import Backend, Deployment, ServedModel
from responses_api.secrets import encrypt

INVITE_SALT = "switchyard.console.invitation"
INVITE_DAYS = 7


class ServiceError(Exception):
    """A rule of the domain was broken; the message is shown to the person."""


# --- API keys ----------------------------------------------------------------


@transaction.atomic
def console_key_create(
    *,
    membership: Membership,
    name: str,
    allowed_models: list[str],
    rpm: int | None,
    tpm: int | None,
    concurrency: int | None,
    expires_at: datetime | None,
) -> tuple[ApiKey, str]:
    key, raw = api_key_create(
        organisation=membership.organisation,
        name=name,
        created_by=membership.user,
        allowed_models=allowed_models,
        rpm=rpm,
        tpm=tpm,
        concurrency=concurrency,
        expires_at=expires_at,
    )
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="api_key.create",
        target=f"{key.name} ({key.prefix}…)",
        details={
            "key_id": str(key.id),
            "allowed_models": key.allowed_models,
            "rpm": rpm,
            "tpm": tpm,
            "concurrency": concurrency,
            "expires_at": expires_at.isoformat() if expires_at else None,
        },
    )
    return key, raw


@transaction.atomic
def console_key_revoke(*, membership: Membership, api_key: ApiKey) -> ApiKey:
    already = api_key.revoked_at is not None
    api_key_revoke(api_key=api_key)
    if not already:
        audit_record(
            organisation=membership.organisation,
            actor=membership.user,
            action="api_key.revoke",
            target=f"{api_key.name} ({api_key.prefix}…)",
            details={"key_id": str(api_key.id)},
        )
    return api_key


# --- Backends ----------------------------------------------------------------

BACKEND_FIELDS = ("name", "base_url", "dialect", "max_concurrency", "enabled")


@transaction.atomic
def backend_save(
    *,
    membership: Membership,
    backend: Backend | None,
    data: dict[str, Any],
    upstream_key: str = "",
    clear_upstream_key: bool = False,
) -> Backend:
    """Create or update one of the organisation's backends.

    The upstream key is write-only: an empty value keeps the stored one."""
    created = backend is None
    if backend is None:
        backend = Backend(organisation=membership.organisation)
    changed = [f for f in BACKEND_FIELDS if getattr(backend, f) != data[f]] if not created else []
    for field in BACKEND_FIELDS:
        setattr(backend, field, data[field])
    key_change = None
    if upstream_key:
        backend.api_key_encrypted = encrypt(upstream_key)
        key_change = "set"
    elif clear_upstream_key and backend.api_key_encrypted:
        backend.api_key_encrypted = ""
        key_change = "cleared"
    backend.save()
    catalog.forget(membership.organisation_id)
    details: dict[str, Any] = {"backend_id": str(backend.id)}
    if created:
        details.update({f: data[f] for f in BACKEND_FIELDS})
    else:
        details["changed"] = changed
    if key_change:
        details["upstream_key"] = key_change
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="backend.create" if created else "backend.update",
        target=backend.name,
        details=details,
    )
    return backend


def backend_test(*, membership: Membership, backend: Backend):
    from console.health import backend_check_recorded
    from console.models import BackendHealthCheck

    result, check = backend_check_recorded(
        backend=backend, source=BackendHealthCheck.Source.CONSOLE
    )
    catalog.forget(membership.organisation_id)
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="backend.test",
        target=backend.name,
        details={"backend_id": str(backend.id), "ok": result.ok, "latency_ms": result.latency_ms},
    )
    return result, check


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
    "supports_vision",
    "price_input",
    "price_cached_input",
    "price_output",
)


@transaction.atomic
def model_save(
    *, membership: Membership, model: ServedModel | None, data: dict[str, Any]
) -> ServedModel:
    created = model is None
    if model is None:
        model = ServedModel(organisation=membership.organisation)
    changed = [f for f in MODEL_FIELDS if getattr(model, f) != data[f]] if not created else []
    for field in MODEL_FIELDS:
        setattr(model, field, data[field])
    model.save()
    catalog.forget(membership.organisation_id)
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="model.create" if created else "model.update",
        target=model.public_id,
        details={"model_id": str(model.id), "changed": changed}
        if not created
        else {"model_id": str(model.id)},
    )
    return model


@transaction.atomic
def deployment_set(
    *, membership: Membership, model: ServedModel, backend: Backend, upstream_name: str
) -> Deployment:
    deployment, _ = Deployment.objects.update_or_create(
        model=model, backend=backend, defaults={"upstream_name": upstream_name}
    )
    catalog.forget(membership.organisation_id)
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="model.deploy",
        target=model.public_id,
        details={"backend": backend.name, "upstream_name": upstream_name},
    )
    return deployment


@transaction.atomic
def deployment_remove(*, membership: Membership, model: ServedModel, backend: Backend) -> None:
    Deployment.objects.filter(model=model, backend=backend).delete()
    catalog.forget(membership.organisation_id)
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="model.undeploy",
        target=model.public_id,
        details={"backend": backend.name},
    )


# --- Members and invitations -------------------------------------------------


def _keep_an_owner(target: Membership) -> None:
    if (
        target.role == Membership.Role.OWNER
        and _owners_left(target.organisation, without=target) == 0
    ):
        raise ServiceError("An organisation always keeps an owner: make someone else owner first.")


def _owners_left(organisation: Organisation, *, without: Membership) -> int:
    return (
        Membership.objects.filter(organisation=organisation, role=Membership.Role.OWNER)
        .exclude(pk=without.pk)
        .count()
    )


@transaction.atomic
def member_add_existing(*, membership: Membership, email: str, role: str) -> Membership:
    """Add a person who already has an account to the organisation."""
    if role == Membership.Role.OWNER:
        require(membership, "owner_manage")
    User = get_user_model()
    email = email.strip().lower()
    user = (
        User.objects.filter(email__iexact=email).first()
        or User.objects.filter(username__iexact=email).first()
    )
    if user is None:
        raise ServiceError(f"No account uses {email}. Send an invitation instead.")
    if Membership.objects.filter(user=user, organisation=membership.organisation).exists():
        raise ServiceError(f"{email} is already a member.")
    added = Membership.objects.create(user=user, organisation=membership.organisation, role=role)
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="member.add",
        target=email,
        details={"role": role},
    )
    return added


@transaction.atomic
def member_role_change(*, membership: Membership, target: Membership, role: str) -> Membership:
    if Membership.Role.OWNER in (role, target.role):
        require(membership, "owner_manage")
    if target.role == role:
        return target
    _keep_an_owner(target)
    before = target.role
    target.role = role
    target.save(update_fields=["role"])
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="member.role",
        target=target.user.get_username(),
        details={"from": before, "to": role},
    )
    return target


@transaction.atomic
def member_remove(*, membership: Membership, target: Membership) -> None:
    _keep_an_owner(target)
    name = target.user.get_username()
    target.delete()
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="member.remove",
        target=name,
        details={"role": target.role},
    )


def invitation_token(invitation: Invitation) -> str:
    return signing.dumps({"i": str(invitation.id)}, salt=INVITE_SALT)


@transaction.atomic
def invitation_create(*, membership: Membership, email: str, role: str) -> tuple[Invitation, str]:
    """Invite someone without an account; returns the invitation and its token."""
    if role == Membership.Role.OWNER:
        require(membership, "owner_manage")
    User = get_user_model()
    email = email.strip().lower()
    if (
        User.objects.filter(email__iexact=email).exists()
        or User.objects.filter(username__iexact=email).exists()
    ):
        raise ServiceError(f"{email} already has an account: add them as an existing user.")
    invitation = Invitation.objects.create(
        organisation=membership.organisation,
        email=email,
        role=role,
        invited_by=membership.user,
        expires_at=timezone.now() + timedelta(days=INVITE_DAYS),
    )
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="member.invite",
        target=email,
        details={"role": role, "invitation_id": str(invitation.id)},
    )
    return invitation, invitation_token(invitation)


@transaction.atomic
def invitation_revoke(*, membership: Membership, invitation: Invitation) -> None:
    if invitation.status != "pending":
        return
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit_record(
        organisation=membership.organisation,
        actor=membership.user,
        action="member.invite_revoke",
        target=invitation.email,
        details={"invitation_id": str(invitation.id)},
    )


def invitation_from_token(token: str) -> Invitation | None:
    """The pending invitation a link names, or None (bad, used, expired, revoked)."""
    try:
        payload = signing.loads(token, salt=INVITE_SALT, max_age=timedelta(days=INVITE_DAYS))
    except signing.BadSignature:
        return None
    invitation = (
        Invitation.objects.select_related("organisation").filter(id=payload.get("i")).first()
    )
    if invitation is None or invitation.status != "pending":
        return None
    return invitation


@transaction.atomic
def invitation_accept(*, invitation: Invitation, password: str):
    """Create the invited person's account and membership; the link is spent."""
    invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if invitation.status != "pending":
        raise ServiceError("This invitation has already been used or has expired.")
    User = get_user_model()
    if User.objects.filter(username__iexact=invitation.email).exists():
        raise ServiceError("An account with this email exists already: sign in instead.")
    user = User.objects.create_user(
        username=invitation.email, email=invitation.email, password=password
    )
    Membership.objects.create(user=user, organisation=invitation.organisation, role=invitation.role)
    invitation.accepted_at = timezone.now()
    invitation.save(update_fields=["accepted_at"])
    audit_record(
        organisation=invitation.organisation,
        actor=user,
        action="member.join",
        target=invitation.email,
        details={"role": invitation.role, "invitation_id": str(invitation.id)},
    )
    return user


# --- Settings ----------------------------------------------------------------

SETTINGS_FIELDS = (
    "name",
    "retention_policy",
    "store_ttl_hours",
    "usage_retention_days",
    "default_rpm",
    "default_tpm",
    "default_concurrency",
)


@transaction.atomic
def organisation_settings_update(*, membership: Membership, data: dict[str, Any]) -> Organisation:
    organisation = Organisation.objects.select_for_update().get(pk=membership.organisation_id)
    changes = {
        f: [getattr(organisation, f), data[f]]
        for f in SETTINGS_FIELDS
        if getattr(organisation, f) != data[f]
    }
    for field in SETTINGS_FIELDS:
        setattr(organisation, field, data[field])
    organisation.save()
    # Keys carry the organisation's limits and retention in the API's cache.
    from responses_api.auth import forget_key

    for key_hash in ApiKey.objects.filter(organisation=organisation).values_list(
        "key_hash", flat=True
    ):
        forget_key(key_hash)
    catalog.forget(organisation.id)
    audit_record(
        organisation=organisation,
        actor=membership.user,
        action="organisation.settings",
        target=organisation.name,
        details={"changed": changes},
    )
    return organisation


def invite_link(request, token: str) -> str:
    from django.urls import reverse

    return request.build_absolute_uri(reverse("console:invitation_accept", args=[token]))
