"""Writes to organisations, memberships and API keys."""

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounts.keys import generate_key, hash_key, visible_prefix
from accounts.models import ApiKey, Membership, Organisation


def organisation_ensure(*, slug: str, name: str | None = None) -> tuple[Organisation, bool]:
    org, created = Organisation.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    if not created and name and org.name != name:
        org.name = name
        org.save(update_fields=["name"])
    return org, created


@transaction.atomic
def member_ensure(
    *, organisation: Organisation, email: str, role: str, password: str | None = None
) -> tuple[Membership, bool]:
    """Add a person to an organisation, creating the user if needed.

    Returns the membership and whether the user was created."""
    User = get_user_model()
    email = email.strip().lower()
    user, user_created = User.objects.get_or_create(username=email, defaults={"email": email})
    if password:
        user.set_password(password)
        user.save(update_fields=["password"])
    elif user_created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    membership, _ = Membership.objects.update_or_create(
        user=user, organisation=organisation, defaults={"role": role}
    )
    return membership, user_created


def api_key_create(
    *,
    organisation: Organisation,
    name: str,
    created_by=None,
    allowed_models: Iterable[str] = (),
    rpm: int | None = None,
    tpm: int | None = None,
    concurrency: int | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; the full key is returned once and never stored."""
    raw = generate_key()
    key = ApiKey.objects.create(
        organisation=organisation,
        name=name,
        created_by=created_by,
        prefix=visible_prefix(raw),
        key_hash=hash_key(raw),
        allowed_models=sorted(set(allowed_models)),
        rpm=rpm,
        tpm=tpm,
        concurrency=concurrency,
        expires_at=expires_at,
    )
    return key, raw


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    from responses_api.auth import forget_key

    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    forget_key(api_key.key_hash)
    return api_key
