"""Who may see and change what: the only way a view gets a tenant object of
accounts (``responses_api.access.objects`` does the same for backends, models and
usage, with the helpers defined here).

Every ``get_<thing>_for_member`` filters by the member's organisation first,
so another organisation's object is a 404 exactly like a missing one; only
then is the role checked (403). Roles (docs/admin/console.md):

======================  =====  =====  =========  ======
capability              owner  admin  developer  viewer
======================  =====  =====  =========  ======
read pages and usage     yes    yes     yes       yes
create API keys          yes    yes     yes       no
revoke any API key       yes    yes     own keys  no
edit keys' limits        yes    yes     no        no
manage backends/models   yes    yes     no        no
manage MCP servers       yes    yes     no        no
manage members           yes    yes     no        no
grant/remove owners      yes    no      no        no
change settings          yes    yes     no        no
read the audit log       yes    yes     no        no
manage admin API keys    yes    yes     no        no
======================  =====  =====  =========  ======

Platform support staff (superusers, or members of the ``support`` group) may
read any organisation's usage log and trace any request id, read-only.
Platform staff (Django's ``is_staff`` or superusers) may also let a backend
sit on a private address (``Backend.allow_private``), which no organisation
role can.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import Http404

from accounts.models import (
    AdminApiKey,
    ApiKey,
    AuditEntry,
    Invitation,
    Membership,
    Organisation,
    ScimGroup,
    ScimUser,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

M = TypeVar("M", bound=Model)

SUPPORT_GROUP = "support"

OWNER = Membership.Role.OWNER
ADMIN = Membership.Role.ADMIN
DEVELOPER = Membership.Role.DEVELOPER
VIEWER = Membership.Role.VIEWER

CAPABILITIES: dict[str, frozenset[str]] = {
    "view": frozenset({OWNER, ADMIN, DEVELOPER, VIEWER}),
    "key_create": frozenset({OWNER, ADMIN, DEVELOPER}),
    "key_revoke_any": frozenset({OWNER, ADMIN}),
    # A key's limits and spend caps: its creator must not raise its own.
    "key_edit": frozenset({OWNER, ADMIN}),
    "backend_manage": frozenset({OWNER, ADMIN}),
    "model_manage": frozenset({OWNER, ADMIN}),
    "mcp_manage": frozenset({OWNER, ADMIN}),
    # Uploaded files (the Files API), which the organisation's keys create.
    "file_manage": frozenset({OWNER, ADMIN, DEVELOPER}),
    "member_manage": frozenset({OWNER, ADMIN}),
    "owner_manage": frozenset({OWNER}),
    "settings_manage": frozenset({OWNER, ADMIN}),
    "audit_view": frozenset({OWNER, ADMIN}),
    "admin_key_manage": frozenset({OWNER, ADMIN}),
}


def can(membership: Membership, capability: str) -> bool:
    return membership.role in CAPABILITIES[capability]


def capabilities(membership: Membership) -> dict[str, bool]:
    """Every capability of the member's role, for templates."""
    return {name: membership.role in roles for name, roles in CAPABILITIES.items()}


def require(membership: Membership, capability: str) -> None:
    if not can(membership, capability):
        raise PermissionDenied(f"Your role ({membership.role}) may not do this.")


def is_support(user: User | AnonymousUser) -> bool:
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name=SUPPORT_GROUP).exists()


def is_platform_staff(user: User | AnonymousUser) -> bool:
    """Whoever runs the platform, as opposed to an organisation's members."""
    if not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_staff or user.is_superuser)


def memberships_of(user: User | AnonymousUser) -> QuerySet[Membership]:
    if not user.is_authenticated:
        return Membership.objects.none()
    return (
        Membership.objects.filter(user=user)
        .select_related("organisation")
        .order_by("organisation__name", "organisation__slug")
    )


def membership_of(user: User | AnonymousUser, organisation_id: int | None) -> Membership | None:
    if organisation_id is None:
        return None
    return memberships_of(user).filter(organisation_id=organisation_id).first()


def uuid_or_404(value: object) -> uuid.UUID:
    """An opaque id from a URL; anything else is a missing object."""
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError as exc:
        raise Http404("Not found.") from exc


def object_or_404(queryset: QuerySet[M], **lookup: Any) -> M:
    """The one object of an already tenant-filtered queryset, or a 404."""
    obj = queryset.filter(**lookup).first()
    if obj is None:
        raise Http404("Not found.")
    return obj


# --- API keys ----------------------------------------------------------------


def api_keys_for_member(*, membership: Membership) -> QuerySet[ApiKey]:
    """The organisation's keys; a model check's own key is the platform's."""
    return ApiKey.objects.filter(
        organisation_id=membership.organisation_id, is_check=False
    ).select_related("created_by")


def get_api_key_for_member(
    *, membership: Membership, key_id: object, revoke: bool = False, edit: bool = False
) -> ApiKey:
    key = object_or_404(api_keys_for_member(membership=membership), id=uuid_or_404(key_id))
    if revoke and not may_revoke(membership=membership, api_key=key):
        raise PermissionDenied("You may revoke only the keys you created.")
    if edit:
        require(membership, "key_edit")
    return key


def may_revoke(*, membership: Membership, api_key: ApiKey) -> bool:
    if can(membership, "key_revoke_any"):
        return True
    return can(membership, "key_create") and api_key.created_by_id == membership.user_id


def admin_keys_for_member(*, membership: Membership) -> QuerySet[AdminApiKey]:
    require(membership, "admin_key_manage")
    return AdminApiKey.objects.filter(organisation_id=membership.organisation_id).select_related(
        "created_by"
    )


def get_admin_key_for_member(*, membership: Membership, key_id: object) -> AdminApiKey:
    return object_or_404(admin_keys_for_member(membership=membership), id=uuid_or_404(key_id))


# --- Members, invitations, audit, settings -----------------------------------


def members_for_member(*, membership: Membership) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(organisation_id=membership.organisation_id)
        .select_related("user")
        .order_by("user__username")
    )


def get_membership_for_member(*, membership: Membership, member_id: object) -> Membership:
    """Another member of the same organisation, for managing them."""
    target = object_or_404(
        members_for_member(membership=membership), public_id=uuid_or_404(member_id)
    )
    require(membership, "member_manage")
    if target.role == OWNER:
        require(membership, "owner_manage")
    return target


def invitations_for_member(*, membership: Membership) -> QuerySet[Invitation]:
    return Invitation.objects.filter(organisation_id=membership.organisation_id)


def get_invitation_for_member(*, membership: Membership, invitation_id: object) -> Invitation:
    invitation = object_or_404(
        invitations_for_member(membership=membership), id=uuid_or_404(invitation_id)
    )
    require(membership, "member_manage")
    return invitation


def audit_for_member(*, membership: Membership) -> QuerySet[AuditEntry]:
    require(membership, "audit_view")
    return AuditEntry.objects.filter(organisation_id=membership.organisation_id)


def organisation_for_member(*, membership: Membership, manage: bool = False) -> Organisation:
    if manage:
        require(membership, "settings_manage")
    return membership.organisation


# --- SCIM provisioning (admin keys with the scim scope) ------------------------


def scim_users_for_admin_key(*, admin_key: AdminApiKey) -> QuerySet[ScimUser]:
    return ScimUser.objects.filter(organisation_id=admin_key.organisation_id).select_related(
        "user", "organisation"
    )


def get_scim_user_for_admin_key(*, admin_key: AdminApiKey, scim_user_id: object) -> ScimUser:
    return object_or_404(
        scim_users_for_admin_key(admin_key=admin_key), id=uuid_or_404(scim_user_id)
    )


def scim_groups_for_admin_key(*, admin_key: AdminApiKey) -> QuerySet[ScimGroup]:
    return ScimGroup.objects.filter(organisation_id=admin_key.organisation_id).select_related(
        "organisation"
    )


def get_scim_group_for_admin_key(*, admin_key: AdminApiKey, scim_group_id: object) -> ScimGroup:
    return object_or_404(
        scim_groups_for_admin_key(admin_key=admin_key), id=uuid_or_404(scim_group_id)
    )
