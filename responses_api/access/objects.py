"""Who may see and change the API's tenant objects: backends, models, MCP
servers and the usage log. The only way a view gets one (``accounts.access`` does the same
for keys, members and settings).

Each ``get_<thing>_for_member`` filters by the member's organisation first,
so another organisation's object is a 404 exactly like a missing one; only
then is the role checked (403).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404

from accounts.access import is_support, object_or_404, require, uuid_or_404
from accounts.models import Membership
from responses_api.models import Backend, McpServer, ServedModel, UsageLog

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


# --- Backends and models -----------------------------------------------------


def backends_for_member(*, membership: Membership) -> QuerySet[Backend]:
    """The organisation's backends and the shared ones it may route to."""
    return Backend.objects.filter(
        Q(organisation_id=membership.organisation_id) | Q(organisation__isnull=True)
    )


def get_backend_for_member(
    *, membership: Membership, backend_id: object, manage: bool = False
) -> Backend:
    backend = object_or_404(backends_for_member(membership=membership), id=uuid_or_404(backend_id))
    if manage:
        require(membership, "backend_manage")
        if backend.organisation_id is None:
            raise PermissionDenied("Shared backends are managed by platform staff.")
    return backend


def models_for_member(*, membership: Membership) -> QuerySet[ServedModel]:
    return ServedModel.objects.filter(organisation_id=membership.organisation_id)


def get_model_for_member(
    *, membership: Membership, model_id: object, manage: bool = False
) -> ServedModel:
    model = object_or_404(models_for_member(membership=membership), id=uuid_or_404(model_id))
    if manage:
        require(membership, "model_manage")
    return model


def mcp_servers_for_member(*, membership: Membership) -> QuerySet[McpServer]:
    return McpServer.objects.filter(organisation_id=membership.organisation_id)


def get_mcp_server_for_member(
    *, membership: Membership, server_id: object, manage: bool = False
) -> McpServer:
    server = object_or_404(mcp_servers_for_member(membership=membership), id=uuid_or_404(server_id))
    if manage:
        require(membership, "mcp_manage")
    return server


# --- Usage -------------------------------------------------------------------


def usage_for_member(*, membership: Membership) -> QuerySet[UsageLog]:
    return UsageLog.objects.filter(organisation_id=membership.organisation_id)


def get_usage_row_for_member(*, membership: Membership, request_id: object) -> UsageLog:
    return object_or_404(
        usage_for_member(membership=membership).select_related("organisation", "api_key"),
        request_id=uuid_or_404(request_id),
    )


# Turns a session page shows, oldest first.
SESSION_TURNS = 1000


def session_turns_for_member(*, membership: Membership, session_id: str) -> list[UsageLog]:
    """A client session's requests in the member's organisation, in order;
    a 404 when it has none (another organisation's session looks missing)."""
    turns = list(
        usage_for_member(membership=membership)
        .filter(session_id=session_id)
        .select_related("api_key")
        .order_by("created_at", "id")[:SESSION_TURNS]
    )
    if not turns:
        raise Http404("Not found.")
    return turns


def usage_for_support(*, user: User | AnonymousUser) -> QuerySet[UsageLog]:
    """Every organisation's usage, read-only, for platform support staff;
    anyone else gets a 404, as if the page did not exist."""
    if not is_support(user):
        raise Http404("Not found.")
    return UsageLog.objects.all()


def get_usage_row_for_support(*, user: User | AnonymousUser, request_id: object) -> UsageLog:
    return object_or_404(
        usage_for_support(user=user).select_related("organisation", "api_key"),
        request_id=uuid_or_404(request_id),
    )
