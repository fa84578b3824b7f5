"""What every management API view shares: the admin key's organisation,
the audit actor, and the one way a view gets a tenant object."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpResponseBase
from rest_framework import viewsets
from rest_framework.request import Request

from accounts.access import object_or_404, uuid_or_404
from accounts.audit import Actor
from accounts.models import AdminApiKey, Organisation


def request_id_header(response: HttpResponseBase) -> None:
    """Every answer names itself, errors included, as the inference API's do."""
    if "X-Request-Id" not in response:
        response["X-Request-Id"] = str(uuid.uuid4())


class AdminViewSet(viewsets.GenericViewSet):
    """Authentication, roles, throttling and pagination come from
    ``REST_FRAMEWORK`` in the settings; the queryset of every view starts
    from the admin key's organisation."""

    lookup_field = "id"
    lookup_value_regex = "[^/]+"
    uuid_lookup = True

    @property
    def admin_key(self) -> AdminApiKey:
        assert isinstance(self.request.auth, AdminApiKey)
        return self.request.auth

    @property
    def organisation(self) -> Organisation:
        return self.admin_key.organisation

    @property
    def actor(self) -> Actor:
        return Actor.admin_api(self.admin_key)

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        if isinstance(self.request.auth, AdminApiKey):
            context["organisation"] = self.organisation
        return context

    def get_queryset(self) -> QuerySet[Any]:
        empty = type(self).queryset
        assert isinstance(empty, QuerySet), "Give the view queryset = Model.objects.none()."
        if getattr(self, "swagger_fake_view", False):
            return empty  # the schema generator has no admin key
        return self.tenant_queryset()

    def tenant_queryset(self) -> QuerySet[Any]:
        """The view's objects in the admin key's organisation."""
        raise NotImplementedError

    def get_object(self) -> Any:
        """Another organisation's object is a 404, exactly like a missing one."""
        value: object = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        if self.uuid_lookup:
            value = uuid_or_404(value)
        queryset: QuerySet[Model] = self.get_queryset()
        return object_or_404(queryset, **{self.lookup_field: value})

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        request_id_header(response)
        return response
