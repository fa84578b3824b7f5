"""The SCIM endpoints: ``Users``, ``Groups`` and the discovery documents.
Each view authenticates (``ScimView``), parses (``protocol``, ``patch``),
calls one service of ``accounts.services.scim_users`` or ``scim_groups``,
and renders the resource."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Any

from django.db.models import QuerySet
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.access import (
    get_scim_group_for_admin_key,
    get_scim_user_for_admin_key,
    scim_groups_for_admin_key,
    scim_users_for_admin_key,
)
from accounts.models import ScimGroup, ScimUser
from accounts.services.scim_groups import (
    scim_group_create,
    scim_group_delete,
    scim_group_update,
)
from accounts.services.scim_users import scim_user_create, scim_user_delete, scim_user_update
from admin_api.scim import discovery
from admin_api.scim.base import ScimView
from admin_api.scim.patch import group_changes, user_changes
from admin_api.scim.protocol import (
    ScimError,
    filter_parse,
    group_parse,
    group_resource,
    list_response,
    page_parse,
    user_parse,
    user_replacement,
    user_resource,
)

USER_FILTERS = {"username": "user_name__iexact", "externalid": "external_id", "id": "id"}
GROUP_FILTERS = {"displayname": "display_name", "externalid": "external_id", "id": "id"}


def _filtered(queryset: QuerySet[Any], request: Request, filters: dict[str, str]) -> QuerySet[Any]:
    found = filter_parse(request.query_params.get("filter"), attributes=filters)
    if found is None:
        return queryset
    lookup, value = found
    if lookup == "id":
        try:
            value = str(uuid.UUID(value))
        except ValueError:
            return queryset.none()  # no resource has such an id
    return queryset.filter(**{lookup: value})


def _page(
    queryset: QuerySet[Any], request: Request, filters: dict[str, str]
) -> tuple[list[Any], int, int]:
    """One page of the filtered resources, their total, and the page's start."""
    queryset = _filtered(queryset, request, filters)
    start, count = page_parse(request.query_params)
    total = queryset.count()
    return list(queryset[start - 1 : start - 1 + count]), total, start


def _created(resource: dict[str, Any]) -> Response:
    """201, with the new resource's address (RFC 7644, 3.3)."""
    return Response(
        resource, status=status.HTTP_201_CREATED, headers={"Location": resource["meta"]["location"]}
    )


class UserList(ScimView):
    def get(self, request: Request) -> Response:
        queryset = scim_users_for_admin_key(admin_key=self.admin_key).prefetch_related("groups")
        users, total, start = _page(queryset, request, USER_FILTERS)
        resources = [user_resource(user, base=self.base) for user in users]
        return Response(list_response(resources, total=total, start=start))

    def post(self, request: Request) -> Response:
        profile = user_parse(request.data)
        scim_user = scim_user_create(
            organisation=self.organisation, actor=self.actor, profile=profile
        )
        return _created(user_resource(scim_user, base=self.base))


class UserDetail(ScimView):
    def scim_user(self, user_id: str) -> ScimUser:
        return get_scim_user_for_admin_key(admin_key=self.admin_key, scim_user_id=user_id)

    def get(self, request: Request, user_id: str) -> Response:
        return Response(user_resource(self.scim_user(user_id), base=self.base))

    def put(self, request: Request, user_id: str) -> Response:
        scim_user = self.scim_user(user_id)
        profile = user_parse(request.data)
        scim_user = scim_user_update(
            scim_user=scim_user, actor=self.actor, changes=user_replacement(profile)
        )
        return Response(user_resource(scim_user, base=self.base))

    def patch(self, request: Request, user_id: str) -> Response:
        scim_user = self.scim_user(user_id)
        changes = user_changes(request.data)
        scim_user = scim_user_update(scim_user=scim_user, actor=self.actor, changes=changes)
        return Response(user_resource(scim_user, base=self.base))

    def delete(self, request: Request, user_id: str) -> Response:
        scim_user_delete(scim_user=self.scim_user(user_id), actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _members_wanted(request: Request) -> bool:
    """Entra ID lists groups with ``excludedAttributes=members``."""
    excluded = request.query_params.get("excludedAttributes", "")
    return "members" not in {name.strip().lower() for name in excluded.split(",")}


class GroupList(ScimView):
    def get(self, request: Request) -> Response:
        queryset = scim_groups_for_admin_key(admin_key=self.admin_key).prefetch_related("members")
        groups, total, start = _page(queryset, request, GROUP_FILTERS)
        members = _members_wanted(request)
        resources = [group_resource(g, base=self.base, members=members) for g in groups]
        return Response(list_response(resources, total=total, start=start))

    def post(self, request: Request) -> Response:
        display_name, external_id, member_ids = group_parse(request.data)
        group = scim_group_create(
            organisation=self.organisation,
            actor=self.actor,
            display_name=display_name,
            external_id=external_id,
            member_ids=member_ids,
        )
        return _created(group_resource(group, base=self.base))


class GroupDetail(ScimView):
    def group(self, group_id: str) -> ScimGroup:
        return get_scim_group_for_admin_key(admin_key=self.admin_key, scim_group_id=group_id)

    def get(self, request: Request, group_id: str) -> Response:
        resource = group_resource(
            self.group(group_id), base=self.base, members=_members_wanted(request)
        )
        return Response(resource)

    def put(self, request: Request, group_id: str) -> Response:
        group = self.group(group_id)
        display_name, external_id, member_ids = group_parse(request.data)
        group = scim_group_update(
            group=group,
            actor=self.actor,
            display_name=display_name,
            external_id=external_id,
            replace=member_ids,
        )
        return Response(group_resource(group, base=self.base))

    def patch(self, request: Request, group_id: str) -> Response:
        group = self.group(group_id)
        changes = group_changes(request.data)
        group = scim_group_update(group=group, actor=self.actor, **asdict(changes))
        # RFC 7644, 3.5.2: 204 when the response returns no resource; Okta
        # and Entra ID both accept either.
        return Response(group_resource(group, base=self.base))

    def delete(self, request: Request, group_id: str) -> Response:
        scim_group_delete(group=self.group(group_id), actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceProviderConfig(ScimView):
    def get(self, request: Request) -> Response:
        return Response(discovery.service_provider_config(self.base))


class ResourceTypes(ScimView):
    def get(self, request: Request, name: str | None = None) -> Response:
        found = discovery.resource_types(self.base)
        if name is None:
            return Response(list_response(found, total=len(found), start=1))
        return Response(_one(found, name))


class Schemas(ScimView):
    def get(self, request: Request, name: str | None = None) -> Response:
        found = discovery.schemas(self.base)
        if name is None:
            return Response(list_response(found, total=len(found), start=1))
        return Response(_one(found, name))


def _one(documents: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for document in documents:
        if document["id"] == name:
            return document
    raise ScimError(404, f"No such resource: {name[:200]}.")


class NotFound(ScimView):
    """Any other path under /scim/v2/: SCIM's 404, once authenticated."""

    def get(self, request: Request, path: str = "") -> Response:
        raise ScimError(404, f"Unknown SCIM endpoint: {request.path[:200]}.")

    post = put = patch = delete = get
