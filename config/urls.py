from django.contrib import admin
from django.urls import include, path

from responses_api import views

urlpatterns = [
    path("healthz", views.healthz),
    path("readyz", views.readyz),
    path("metrics", views.metrics),
    path("admin/", admin.site.urls),
    path("console/", include("console.urls")),
    path("", views.home),
]
