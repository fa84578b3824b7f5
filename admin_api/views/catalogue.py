"""Backends (with their connection check) and models (with deployments)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.audit import audit_record
from admin_api.errors import service_errors
from admin_api.serializers.base import DeletedSerializer, deleted
from admin_api.serializers.catalogue import (
    BackendCheckSerializer,
    BackendSerializer,
    ModelSerializer,
)
from admin_api.views.base import AdminViewSet
from admin_api.writes import BACKEND_RENAME, backend_service_data, model_write
from responses_api.backends.health import backend_check
from responses_api.catalogue.services.backends import backend_create, backend_delete, backend_update
from responses_api.catalogue.services.served_models import model_delete
from responses_api.models import Backend, ServedModel


@extend_schema_view(
    list=extend_schema(summary="The organisation's backends, and the shared ones"),
    retrieve=extend_schema(summary="One backend"),
)
class BackendViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, AdminViewSet):
    queryset = Backend.objects.none()
    serializer_class = BackendSerializer

    def tenant_queryset(self) -> QuerySet[Backend]:
        return Backend.objects.filter(
            Q(organisation=self.organisation) | Q(organisation__isnull=True)
        )

    def get_own(self) -> Backend:
        backend: Backend = self.get_object()
        if backend.organisation_id is None:
            raise PermissionDenied("Shared backends are managed by platform staff.")
        return backend

    @extend_schema(summary="Add a backend")
    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = backend_service_data(serializer.validated_data)
        if data.get("upstream_key") is None:
            data.pop("upstream_key", None)
        with service_errors(**BACKEND_RENAME):
            backend = backend_create(organisation=self.organisation, actor=self.actor, **data)
        return Response(self.get_serializer(backend).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Change a backend (only the fields given)")
    def partial_update(self, request: Request, id: str) -> Response:
        backend = self.get_own()
        serializer = self.get_serializer(backend, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with service_errors(**BACKEND_RENAME):
            backend = backend_update(
                backend=backend,
                actor=self.actor,
                data=backend_service_data(serializer.validated_data),
            )
        return Response(self.get_serializer(backend).data)

    @extend_schema(
        summary="Remove a backend (its deployments go with it)", responses=DeletedSerializer
    )
    def destroy(self, request: Request, id: str) -> Response:
        backend = self.get_own()
        backend_delete(backend=backend, actor=self.actor)
        return Response(deleted("backend", id))

    @extend_schema(
        summary="Test the connection now (GET /models on the backend)",
        request=None,
        responses=BackendCheckSerializer,
    )
    @action(detail=True, methods=["post"])
    def check(self, request: Request, id: str) -> Response:
        backend = self.get_own()
        result = backend_check(backend=backend)
        audit_record(
            organisation=backend.organisation,
            actor=self.actor,
            action="backend.test",
            target=backend.name,
            details={"backend_id": str(backend.id), "ok": result.ok},
        )
        body = {
            "object": "backend.check",
            "ok": result.ok,
            "latency_ms": result.latency_ms,
            "models": result.models,
            "version": result.version,
            "error": result.error,
            "backend": self.get_serializer(backend).data,
        }
        return Response(body)


@extend_schema_view(
    list=extend_schema(summary="The organisation's models"),
    retrieve=extend_schema(summary="One model"),
)
class ModelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, AdminViewSet):
    queryset = ServedModel.objects.none()
    serializer_class = ModelSerializer

    def tenant_queryset(self) -> QuerySet[ServedModel]:
        return ServedModel.objects.filter(organisation=self.organisation).prefetch_related(
            "deployments__backend"
        )

    def _written(self, model: ServedModel) -> dict[str, Any]:
        return dict(self.get_serializer(self.get_queryset().get(pk=model.pk)).data)

    @extend_schema(summary="Add a model, with the backends that serve it")
    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            model = model_write(
                organisation=self.organisation,
                actor=self.actor,
                model=None,
                data=serializer.validated_data,
            )
        return Response(self._written(model), status=status.HTTP_201_CREATED)

    @extend_schema(summary="Change a model (only the fields given; deployments replace)")
    def partial_update(self, request: Request, id: str) -> Response:
        model = self.get_object()
        serializer = self.get_serializer(model, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            model = model_write(
                organisation=self.organisation,
                actor=self.actor,
                model=model,
                data=serializer.validated_data,
            )
        return Response(self._written(model))

    @extend_schema(summary="Remove a model from the catalogue", responses=DeletedSerializer)
    def destroy(self, request: Request, id: str) -> Response:
        model_delete(model=self.get_object(), actor=self.actor)
        return Response(deleted("model", id))
