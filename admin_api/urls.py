"""The management API's routes, under ``/api/v1/admin/`` (``config/urls.py``).

``config/asgi.py`` sends this prefix to Django (the rest of ``/api/v1/`` is
the inference API's own fast path, ``responses_api.edge.routes``).
"""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularJSONAPIView
from rest_framework.routers import SimpleRouter

# Registers the schema's extensions (the admin-key scheme, the constant
# fields) before anything can generate the schema; ``config/urls.py`` loads
# this module on the management API's first request, not at start-up.
from admin_api import schema  # noqa: F401
from admin_api.errors import not_found_view
from admin_api.views.accounts import (
    ApiKeyViewSet,
    AuditViewSet,
    InvitationViewSet,
    MemberViewSet,
    MeViewSet,
    OrganisationViewSet,
)
from admin_api.views.catalogue import BackendViewSet, ModelViewSet
from admin_api.views.docs import docs
from admin_api.views.mcp import McpServerViewSet
from admin_api.views.summary import UsageSummaryViewSet
from admin_api.views.usage import UsageViewSet
from admin_api.views.web_search import WebSearchViewSet

app_name = "admin_api"


class Router(SimpleRouter):
    """Paths with or without the trailing slash, as clients write them."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"


router = Router()
router.register("keys", ApiKeyViewSet, basename="key")
router.register("backends", BackendViewSet, basename="backend")
router.register("models", ModelViewSet, basename="model")
router.register("mcp-servers", McpServerViewSet, basename="mcp-server")
router.register("members", MemberViewSet, basename="member")
router.register("invitations", InvitationViewSet, basename="invitation")
router.register("audit", AuditViewSet, basename="audit")

urlpatterns = [
    re_path(r"^openapi\.json$", SpectacularJSONAPIView.as_view(), name="schema"),
    re_path(r"^docs/?$", docs, name="docs"),
    re_path(
        r"^organisation/?$",
        OrganisationViewSet.as_view({"get": "retrieve", "patch": "partial_update"}),
        name="organisation",
    ),
    re_path(r"^me/?$", MeViewSet.as_view({"get": "retrieve"}), name="me"),
    re_path(
        r"^web-search/?$",
        WebSearchViewSet.as_view(
            {"get": "retrieve", "put": "update", "patch": "update", "delete": "destroy"}
        ),
        name="web-search",
    ),
    # Before the usage list: time buckets built on the usage roll-ups.
    re_path(
        r"^usage/summary/?$",
        UsageSummaryViewSet.as_view({"get": "summary"}),
        name="usage-summary",
    ),
    re_path(r"^usage/?$", UsageViewSet.as_view({"get": "list"}), name="usage"),
    *router.urls,
    # Anything else under the prefix: the API's 404, not the console's page.
    path("<path:path>", not_found_view),
    path("", not_found_view),
]
