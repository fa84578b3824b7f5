"""SCIM provisioning of people (``ScimUser``, docs/admin/scim.md):
create, change, deactivate, reactivate and delete, as an identity provider
asks through ``admin_api.scim``.

The account is found, or created without a password, by the person's e-mail
address, as single sign-on finds it. While the provider says ``active`` the
person is a member; their role comes from the names of their SCIM groups
(and their e-mail domain) through :func:`accounts.oidc_rules.grants_for`, the
function sign-in uses, with the rules of ``SWITCHYARD_OIDC_GROUPS`` and
``SWITCHYARD_OIDC_DOMAINS``; when rules name the organisation but none
matches, ``viewer``. Unlike sign-in, which only raises roles, the provider's
groups are then the whole truth, so roles follow them down too. When no rule
names the organisation, SCIM manages who is a member, not roles: newcomers
are viewers, and the console sets roles. The owner role is the exception,
as everywhere an admin key acts: SCIM neither grants it (a rule naming owner
gives admin) nor changes or removes an owner (``owner_required``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.audit import Actor, audit_record
from accounts.models import Membership, Organisation, ScimUser
from accounts.oidc_rules import SsoConfig, grants_for
from accounts.services.deprovision import member_deprovision
from accounts.services.members import member_add, member_role_set
from accounts.validation import account_for_email, text_field

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# A provisioned person no rule gives a role: the least one.
DEFAULT_ROLE = Membership.Role.VIEWER


class ScimConflict(ValidationError):
    """The change collides with what exists (a ``userName`` or an account
    taken): SCIM's 409 ``uniqueness``, not a 400."""


@dataclass(frozen=True, slots=True)
class ScimProfile:
    """What a provider says about a person, as ``admin_api.scim`` parsed it;
    no ``email``: ``user_name`` is the address."""

    user_name: str
    email: str = ""
    external_id: str = ""
    given_name: str = ""
    family_name: str = ""
    display_name: str = ""
    active: bool = True


PROFILE_FIELDS = tuple(ScimProfile.__dataclass_fields__)
ROW_FIELDS = ("user_name", "external_id", "given_name", "family_name", "display_name", "active")


def _optional_text(value: object, field: str, max_length: int) -> str:
    if value in (None, ""):
        return ""
    return text_field(value, field=field, message="A string.", max_length=max_length)


def _email(value: object) -> str:
    email = text_field(value, field="emails", message="Give an e-mail address.", max_length=254)
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError({"emails": f"{email!r} is not an e-mail address."}) from None
    return email.lower()


CHECKS: dict[str, Any] = {
    "user_name": lambda v: text_field(
        v, field="userName", message="Give a userName.", max_length=254
    ),
    "email": _email,
    "external_id": lambda v: _optional_text(v, "externalId", 254),
    "given_name": lambda v: _optional_text(v, "name.givenName", 150),
    "family_name": lambda v: _optional_text(v, "name.familyName", 150),
    "display_name": lambda v: _optional_text(v, "displayName", 200),
    "active": lambda v: v,
}


def _clean(changes: Mapping[str, object]) -> dict[str, Any]:
    unknown = set(changes) - set(CHECKS)
    if unknown:
        raise ValidationError({name: "This attribute cannot be changed." for name in unknown})
    if "active" in changes and not isinstance(changes["active"], bool):
        raise ValidationError({"active": "A boolean."})
    return {field: CHECKS[field](value) for field, value in changes.items()}


def _user_name_free(*, organisation: Organisation, user_name: str, but: ScimUser | None) -> None:
    taken = ScimUser.objects.filter(organisation=organisation, user_name__iexact=user_name)
    if but is not None:
        taken = taken.exclude(pk=but.pk)
    if taken.exists():
        raise ScimConflict({"userName": f"{user_name} is provisioned already."})


@transaction.atomic
def scim_user_create(*, organisation: Organisation, actor: Actor, profile: ScimProfile) -> ScimUser:
    """Provision a person: their account (found by e-mail, or created with no
    password: they sign in with single sign-on) and, if active, their
    membership. Someone already a member (invited, or by sign-in) is taken
    over by the provider, their membership kept."""
    clean = _clean(asdict(profile) | {"email": profile.email or profile.user_name})
    _user_name_free(organisation=organisation, user_name=clean["user_name"], but=None)
    user = account_for_email(clean["email"])
    created = user is None
    if user is None:
        user = _account_create(clean)
    elif ScimUser.objects.filter(organisation=organisation, user=user).exists():
        raise ScimConflict({"emails": f"{clean['email']} is provisioned already."})
    try:
        # A provider retrying a create it thinks lost may race the first.
        with transaction.atomic():
            scim_user = ScimUser.objects.create(
                organisation=organisation, user=user, **{f: clean[f] for f in ROW_FIELDS}
            )
    except IntegrityError:
        raise ScimConflict({"userName": f"{clean['user_name']} is provisioned already."}) from None
    audit_record(
        organisation=organisation,
        actor=actor,
        action="scim.user_create",
        target=scim_user.user_name,
        details={
            "scim_user_id": str(scim_user.id),
            "email": clean["email"],
            "external_id": scim_user.external_id,
            "active": scim_user.active,
            "account_created": created,
        },
    )
    membership_sync(scim_user=scim_user, actor=actor)
    return scim_user


def _account_create(clean: Mapping[str, Any]) -> User:
    email = clean["email"]
    user = get_user_model()(
        username=email,
        email=email,
        first_name=clean["given_name"],
        last_name=clean["family_name"],
    )
    user.set_unusable_password()
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError:
        # Another request made the account meanwhile.
        raise ScimConflict({"emails": f"An account named {email} exists already."}) from None
    return user


@transaction.atomic
def scim_user_update(
    *, scim_user: ScimUser, actor: Actor, changes: Mapping[str, object]
) -> ScimUser:
    """Change what the provider says (only the fields given; PUT gives them
    all). ``active`` false deprovisions (:func:`member_deprovision`), true
    restores the membership. A new e-mail address renames the account only
    if no other organisation shares it: one organisation's provider never
    renames someone another organisation knows (409 then)."""
    clean = _clean(changes)
    if "user_name" in clean:
        _user_name_free(
            organisation=scim_user.organisation, user_name=clean["user_name"], but=scim_user
        )
    changed = {
        f: [getattr(scim_user, f), clean[f]]
        for f in ROW_FIELDS
        if f in clean and getattr(scim_user, f) != clean[f]
    }
    before = scim_user.user.email
    if "email" in clean and _account_email_set(scim_user, clean["email"]):
        changed["email"] = [before, clean["email"]]
    if not changed:
        return scim_user
    for field in changed.keys() - {"email"}:
        setattr(scim_user, field, clean[field])
    scim_user.updated_at = timezone.now()
    scim_user.save()
    audit_record(
        organisation=scim_user.organisation,
        actor=actor,
        action="scim.user_update",
        target=scim_user.user_name,
        details={"scim_user_id": str(scim_user.id), "changed": changed},
    )
    if "active" in changed:
        membership_sync(scim_user=scim_user, actor=actor)
    return scim_user


def _account_email_set(scim_user: ScimUser, email: str) -> bool:
    user = scim_user.user
    if email in (user.email.lower(), user.get_username().lower()):
        return False
    holder = account_for_email(email)
    if holder is not None and holder.pk != user.pk:
        raise ScimConflict({"emails": f"Another account uses {email}."})
    organisation_id = scim_user.organisation_id
    shared = (
        Membership.objects.filter(user=user).exclude(organisation_id=organisation_id).exists()
        or ScimUser.objects.filter(user=user).exclude(organisation_id=organisation_id).exists()
    )
    if shared:
        raise ScimConflict(
            {"emails": "This account's address cannot be changed from this organisation."}
        )
    user.email = user.username = email
    user.save(update_fields=["email", "username"])
    return True


@transaction.atomic
def scim_user_delete(*, scim_user: ScimUser, actor: Actor) -> None:
    """Deprovision the person, then forget what the provider said (their
    groups included); the account stays, as :func:`member_remove` leaves it."""
    scim_user.active = False
    membership_sync(scim_user=scim_user, actor=actor)
    audit_record(
        organisation=scim_user.organisation,
        actor=actor,
        action="scim.user_delete",
        target=scim_user.user_name,
        details={"scim_user_id": str(scim_user.id)},
    )
    scim_user.delete()


def scim_role(*, scim_user: ScimUser) -> str | None:
    """The role the person's groups (and e-mail domain) give by the sign-in
    rules; :data:`DEFAULT_ROLE` when rules name the organisation but none
    matches; None when no rule names it: roles are then the console's."""
    config: SsoConfig | None = settings.SWITCHYARD_SSO
    rules = (*config.domain_rules, *config.group_rules) if config is not None else ()
    slug = scim_user.organisation.slug
    if not any(rule.organisation == slug for rule in rules):
        return None
    user = scim_user.user
    grants = grants_for(
        email=user.email or user.get_username(),
        groups=scim_user.groups.values_list("display_name", flat=True),
        domain_rules=config.domain_rules if config is not None else (),
        group_rules=config.group_rules if config is not None else (),
    )
    role = grants.get(slug, DEFAULT_ROLE)
    return Membership.Role.ADMIN if role == Membership.Role.OWNER else role


def membership_sync(*, scim_user: ScimUser, actor: Actor) -> None:
    """Make the membership what the provider says: none while inactive
    (deprovisioned), else the role of :func:`scim_role`. An owner keeps their
    role; removing one is refused as :func:`member_remove` refuses it."""
    member = (
        Membership.objects.filter(user=scim_user.user, organisation=scim_user.organisation)
        .select_related("user", "organisation")
        .first()
    )
    if not scim_user.active:
        if member is not None:
            member_deprovision(member=member, actor=actor)
        return
    role = scim_role(scim_user=scim_user)
    if member is None:
        user = scim_user.user
        member_add(
            organisation=scim_user.organisation,
            actor=actor,
            email=user.email or user.get_username(),
            role=role or DEFAULT_ROLE,
        )
    elif role is not None and member.role not in (role, Membership.Role.OWNER):
        member_role_set(member=member, actor=actor, role=role)
