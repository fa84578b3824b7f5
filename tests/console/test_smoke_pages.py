"""Every console page renders for an owner (a broad net for template errors)."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_every_page_renders_for_an_owner(as_user, estates):
    acme = estates["acme"]
    client = as_user("alice")
    urls = [
        reverse("console:dashboard"),
        reverse("console:dashboard") + "?range=7d",
        reverse("console:dashboard") + "?range=30d",
        reverse("console:keys"),
        reverse("console:key_create"),
        reverse("console:key_revoke", args=[acme.key.id]),
        reverse("console:backends"),
        reverse("console:backend_create"),
        reverse("console:backend", args=[acme.backend.id]),
        reverse("console:backend_edit", args=[acme.backend.id]),
        reverse("console:models"),
        reverse("console:model_create"),
        reverse("console:model_edit", args=[acme.model.id]),
        reverse("console:usage"),
        reverse("console:usage") + "?status=5xx&stream=yes&range=24h",
        reverse("console:trace", args=[acme.row.request_id]),
        reverse("console:members"),
        reverse("console:settings"),
        reverse("console:audit"),
        reverse("console:password"),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
