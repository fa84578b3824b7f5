from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from console.views import signin
from responses_api import views
from responses_api.edge import routes

urlpatterns = [
    path("healthz", views.healthz),
    path("readyz", views.readyz),
    path("metrics", views.metrics),
    # The API itself is routed to its consumer in config/asgi.py, except its pages.
    re_path(routes.SCHEMA_PAGE.url_pattern(), views.openapi_json),
    re_path(routes.DOCS_PAGE.url_pattern(), views.api_docs),
    # The management API; config/asgi.py routes this prefix to Django. Named,
    # not imported: Django imports it on its first request (or the first
    # ``reverse()``), so that a web process serving only inference does not
    # carry DRF and drf-spectacular.
    path(
        routes.DJANGO_PREFIX.removeprefix("/") + "/", ("admin_api.urls", "admin_api", "admin_api")
    ),
    # SCIM 2.0 provisioning (docs/admin/scim.md), loaded on its
    # first request like the management API.
    path("scim/v2/", ("admin_api.scim.urls", "scim", "scim")),
    # While passwords are off, the admin's sign-in is the console's.
    path("admin/login/", signin.admin_login),
    path("admin/", admin.site.urls),
    path("console/", include("console.urls")),
    # What browsers and tools ask for before any page names its icon.
    path("favicon.ico", RedirectView.as_view(url=static("console/favicon.svg"))),
    path("", views.home),
]
