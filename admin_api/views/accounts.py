"""Organisation settings, API keys, members, invitations, the audit log,
and the calling admin key itself."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import ApiKey, AuditEntry, Invitation, Membership
from accounts.services.api_keys import api_key_create, api_key_revoke, api_key_update
from accounts.services.invitations import invitation_create, invitation_revoke
from accounts.services.members import member_remove, member_role_set
from accounts.services.organisations import organisation_settings_update
from admin_api.errors import service_errors
from admin_api.filters import AuditFilter
from admin_api.serializers.accounts import (
    AdminApiKeySerializer,
    ApiKeyCreatedSerializer,
    ApiKeySerializer,
    AuditEntrySerializer,
    InvitationCreatedSerializer,
    InvitationSerializer,
    MemberSerializer,
    OrganisationSerializer,
)
from admin_api.serializers.base import DeletedSerializer, deleted
from admin_api.serializers.spend import this_month
from admin_api.views.base import AdminViewSet
from responses_api.usage.monthly import month_spent_by_key


class OrganisationViewSet(AdminViewSet):
    serializer_class = OrganisationSerializer

    @extend_schema(summary="The organisation's settings")
    def retrieve(self, request: Request) -> Response:
        return Response(self.get_serializer(self.organisation).data)

    @extend_schema(summary="Change the organisation's settings (only the fields given)")
    def partial_update(self, request: Request) -> Response:
        serializer = self.get_serializer(self.organisation, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            organisation = organisation_settings_update(
                organisation=self.organisation, actor=self.actor, data=serializer.validated_data
            )
        return Response(self.get_serializer(organisation).data)


class MeViewSet(AdminViewSet):
    serializer_class = AdminApiKeySerializer

    @extend_schema(summary="The admin key making this request")
    def retrieve(self, request: Request) -> Response:
        return Response(self.get_serializer(self.admin_key).data)


@extend_schema_view(
    list=extend_schema(summary="The organisation's API keys"),
    retrieve=extend_schema(summary="One API key"),
)
class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, AdminViewSet):
    queryset = ApiKey.objects.none()
    serializer_class = ApiKeySerializer

    def tenant_queryset(self) -> QuerySet[ApiKey]:
        return ApiKey.objects.filter(organisation=self.organisation).select_related("created_by")

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if self.action == "list" and "organisation" in context:
            month = this_month()
            context["spend_by_key"] = (
                month,
                month_spent_by_key(self.organisation.pk, month=month),
            )
        return context

    @extend_schema(
        summary="Create an API key; the answer holds the full key, once",
        responses={201: ApiKeyCreatedSerializer},
    )
    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            key, raw = api_key_create(
                organisation=self.organisation, actor=self.actor, **serializer.validated_data
            )
        data = ApiKeyCreatedSerializer(key, context=self.get_serializer_context()).data
        data["key"] = raw
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Change a key's name, models, limits, spend limits or expiry")
    def partial_update(self, request: Request, id: str) -> Response:
        key = self.get_object()
        serializer = self.get_serializer(key, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            key = api_key_update(api_key=key, actor=self.actor, data=serializer.validated_data)
        return Response(self.get_serializer(key).data)

    @extend_schema(summary="Revoke an API key (at once; it cannot be undone)")
    def destroy(self, request: Request, id: str) -> Response:
        key = api_key_revoke(api_key=self.get_object(), actor=self.actor)
        return Response(self.get_serializer(key).data)


@extend_schema_view(list=extend_schema(summary="The organisation's members"))
class MemberViewSet(mixins.ListModelMixin, AdminViewSet):
    queryset = Membership.objects.none()
    serializer_class = MemberSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"

    def tenant_queryset(self) -> QuerySet[Membership]:
        return Membership.objects.filter(organisation=self.organisation).select_related("user")

    @extend_schema(summary="One member")
    def retrieve(self, request: Request, id: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(summary="Give a member another role")
    def partial_update(self, request: Request, id: str) -> Response:
        member = self.get_object()
        serializer = self.get_serializer(member, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        if "role" in serializer.validated_data:
            with service_errors():
                member = member_role_set(
                    member=member, actor=self.actor, role=serializer.validated_data["role"]
                )
        return Response(self.get_serializer(member).data)

    @extend_schema(summary="Remove a member (their account stays)", responses=DeletedSerializer)
    def destroy(self, request: Request, id: str) -> Response:
        member = self.get_object()
        with service_errors():
            member_remove(member=member, actor=self.actor)
        return Response(deleted("member", member.public_id))


def invitation_url(token: str) -> str:
    path = reverse("console:invitation_accept", args=[token])
    return settings.SWITCHYARD_PUBLIC_URL.rstrip("/") + path


@extend_schema_view(
    list=extend_schema(summary="The organisation's invitations"),
    retrieve=extend_schema(summary="One invitation"),
)
class InvitationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, AdminViewSet):
    queryset = Invitation.objects.none()
    serializer_class = InvitationSerializer

    def tenant_queryset(self) -> QuerySet[Invitation]:
        return Invitation.objects.filter(organisation=self.organisation).select_related(
            "invited_by"
        )

    @extend_schema(
        summary="Invite someone by email; the answer holds the one-time link",
        responses={201: InvitationCreatedSerializer},
    )
    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data: dict[str, Any] = serializer.validated_data
        with service_errors():
            invitation, token = invitation_create(
                organisation=self.organisation,
                actor=self.actor,
                email=data["email"],
                role=data.get("role", Membership.Role.DEVELOPER),
            )
        body = InvitationCreatedSerializer(invitation, context=self.get_serializer_context()).data
        body["url"] = invitation_url(token)
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Withdraw a pending invitation; its link stops working")
    def destroy(self, request: Request, id: str) -> Response:
        invitation = invitation_revoke(invitation=self.get_object(), actor=self.actor)
        return Response(self.get_serializer(invitation).data)


@extend_schema_view(list=extend_schema(summary="The audit log, newest first"))
class AuditViewSet(mixins.ListModelMixin, AdminViewSet):
    queryset = AuditEntry.objects.none()
    serializer_class = AuditEntrySerializer
    filterset_class = AuditFilter
    lookup_field = "pk"
    uuid_lookup = False

    def tenant_queryset(self) -> QuerySet[AuditEntry]:
        return AuditEntry.objects.filter(organisation=self.organisation)
