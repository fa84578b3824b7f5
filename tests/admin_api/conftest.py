"""Management API fixtures: an admin and a viewer key for Acme, an admin key
for Globex, and a little of everything in both organisations (the console's
``estates``: a backend, a model, an API key and a usage row each)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.console.conftest import as_user, crew, estates, usage_row  # noqa: F401

ADMIN = "/api/v1/admin"


@pytest.fixture
def admin_keys(crew):  # noqa: F811
    from accounts.admin_keys import admin_key_create

    acme_admin, acme_admin_raw = admin_key_create(
        organisation=crew["acme"], name="acme automation", role="admin"
    )
    _, acme_viewer_raw = admin_key_create(
        organisation=crew["acme"], name="acme reports", role="viewer"
    )
    _, globex_admin_raw = admin_key_create(
        organisation=crew["globex"], name="globex automation", role="admin"
    )
    return {
        "acme": acme_admin_raw,
        "acme_viewer": acme_viewer_raw,
        "globex": globex_admin_raw,
        "acme_key": acme_admin,
    }


@pytest.fixture
def api(admin_keys):
    """``api("acme")``: a DRF test client sending that admin key."""

    def client(name: str = "acme") -> APIClient:
        made = APIClient()
        made.credentials(HTTP_AUTHORIZATION=f"Bearer {admin_keys[name]}")
        return made

    return client


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert response["X-Request-Id"]
    return body["error"]
