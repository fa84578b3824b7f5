"""Backends (with their connection check) and models (with deployments)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.audit import Actor, audit_record
from accounts.models import Organisation
from admin_api.errors import service_errors
from admin_api.serializers.base import DeletedSerializer, deleted
from admin_api.serializers.catalogue import (
    BackendCheckSerializer,
    BackendSerializer,
    ModelSerializer,
)
from admin_api.views.base import AdminViewSet
from responses_api.backends.health import backend_check
from responses_api.models import Backend, Deployment, ServedModel
from responses_api.services import (
    MODEL_FIELDS,
    backend_create,
    backend_delete,
    backend_update,
    deployment_remove,
    deployment_set,
    model_create,
    model_delete,
    model_update,
)

BACKEND_RENAME = {"upstream_key": "upstream_api_key"}


def backend_service_data(validated: dict[str, Any]) -> dict[str, Any]:
    """The serializer's fields as ``backend_create``/``backend_update`` name them."""
    data = dict(validated)
    if "upstream_api_key" in data:
        data["upstream_key"] = data.pop("upstream_api_key")
    return data


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


@transaction.atomic
def model_write(
    *,
    organisation: Organisation,
    actor: Actor,
    model: ServedModel | None,
    data: dict[str, Any],
) -> ServedModel:
    """Create or change a model and make its deployments exactly those given
    (when given), in one transaction: each step is its service function."""
    fields = {name: value for name, value in data.items() if name in MODEL_FIELDS}
    deployments = data.get("deployments")
    if model is None:
        model = model_create(organisation=organisation, actor=actor, **fields)
    elif fields:
        model = model_update(model=model, actor=actor, data=fields)
    if deployments is not None:
        wanted = {d["backend_id"].pk: d for d in deployments}
        for current in Deployment.objects.filter(model=model).select_related("backend"):
            if current.backend_id not in wanted:
                deployment_remove(model=model, backend=current.backend, actor=actor)
            elif current.upstream_name == wanted[current.backend_id]["upstream_name"]:
                wanted.pop(current.backend_id)
        for deployment in wanted.values():
            deployment_set(
                model=model,
                backend=deployment["backend_id"],
                actor=actor,
                upstream_name=deployment["upstream_name"],
            )
    return model


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
