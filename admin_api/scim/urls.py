"""SCIM's routes, under ``/scim/v2/`` (``config/urls.py``); each with or
without a trailing slash, as providers write them. Resource names are
case-sensitive in SCIM's examples, and providers send them so."""

from django.urls import re_path

from admin_api.scim import views

app_name = "scim"

urlpatterns = [
    re_path(r"^Users/?$", views.UserList.as_view(), name="users"),
    re_path(r"^Users/(?P<user_id>[^/]+)/?$", views.UserDetail.as_view(), name="user"),
    re_path(r"^Groups/?$", views.GroupList.as_view(), name="groups"),
    re_path(r"^Groups/(?P<group_id>[^/]+)/?$", views.GroupDetail.as_view(), name="group"),
    re_path(
        r"^ServiceProviderConfig/?$",
        views.ServiceProviderConfig.as_view(),
        name="service-provider-config",
    ),
    re_path(r"^ResourceTypes/?$", views.ResourceTypes.as_view(), name="resource-types"),
    re_path(r"^ResourceTypes/(?P<name>[^/]+)/?$", views.ResourceTypes.as_view()),
    re_path(r"^Schemas/?$", views.Schemas.as_view(), name="schemas"),
    re_path(r"^Schemas/(?P<name>[^/]+)/?$", views.Schemas.as_view()),
    re_path(r"^(?P<path>.*)$", views.NotFound.as_view()),
]
