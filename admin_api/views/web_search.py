"""The organisation's web search provider: one binding, or none (then
``web_search`` is dropped with a notice)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from admin_api.errors import service_errors
from admin_api.serializers.base import DeletedSerializer, deleted
from admin_api.serializers.web_search import WebSearchProviderSerializer
from admin_api.views.base import AdminViewSet
from responses_api.catalogue.services.web_search import (
    web_search_bind,
    web_search_provider_of,
    web_search_unbind,
)
from responses_api.models import WebSearchProvider


class WebSearchViewSet(AdminViewSet):
    queryset = WebSearchProvider.objects.none()
    serializer_class = WebSearchProviderSerializer

    def tenant_queryset(self) -> QuerySet[WebSearchProvider]:
        return WebSearchProvider.objects.filter(organisation=self.organisation)

    def get_object(self) -> WebSearchProvider:
        return self._provider()

    def _provider(self) -> WebSearchProvider:
        provider = web_search_provider_of(self.organisation)
        if provider is None:
            raise Http404
        return provider

    @extend_schema(summary="The organisation's web search provider")
    def retrieve(self, request: Request) -> Response:
        return Response(self.get_serializer(self._provider()).data)

    @extend_schema(summary="Bind a web search provider, or change the binding (the fields given)")
    def update(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            provider = web_search_bind(
                organisation=self.organisation,
                actor=self.actor,
                data=dict(serializer.validated_data),
            )
        return Response(self.get_serializer(provider).data)

    @extend_schema(summary="Unbind the web search provider", responses=DeletedSerializer)
    def destroy(self, request: Request) -> Response:
        provider = self._provider()
        web_search_unbind(organisation=self.organisation, actor=self.actor)
        return Response(deleted("web_search_provider", str(provider.id)))
