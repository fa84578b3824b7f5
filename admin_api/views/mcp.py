"""MCP servers: the organisation's registry of remote tool servers."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response

from admin_api.errors import service_errors
from admin_api.filters import McpServerFilter
from admin_api.serializers.base import DeletedSerializer, deleted
from admin_api.serializers.mcp import McpServerSerializer
from admin_api.views.base import AdminViewSet
from responses_api.catalogue.services.mcp_servers import (
    mcp_server_create,
    mcp_server_delete,
    mcp_server_update,
)
from responses_api.models import McpServer


@extend_schema_view(
    list=extend_schema(summary="The organisation's MCP servers"),
    retrieve=extend_schema(summary="One MCP server"),
)
class McpServerViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, AdminViewSet):
    queryset = McpServer.objects.none()
    serializer_class = McpServerSerializer
    filterset_class = McpServerFilter

    def tenant_queryset(self) -> QuerySet[McpServer]:
        return McpServer.objects.filter(organisation=self.organisation)

    @extend_schema(summary="Register an MCP server")
    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        if data.get("authorization") is None:
            data.pop("authorization", None)
        with service_errors():
            server = mcp_server_create(organisation=self.organisation, actor=self.actor, **data)
        return Response(self.get_serializer(server).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Change an MCP server (only the fields given)")
    def partial_update(self, request: Request, id: str) -> Response:
        server = self.get_object()
        serializer = self.get_serializer(server, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            server = mcp_server_update(
                server=server, actor=self.actor, data=serializer.validated_data
            )
        return Response(self.get_serializer(server).data)

    @extend_schema(summary="Remove an MCP server", responses=DeletedSerializer)
    def destroy(self, request: Request, id: str) -> Response:
        mcp_server_delete(server=self.get_object(), actor=self.actor)
        return Response(deleted("mcp_server", id))
