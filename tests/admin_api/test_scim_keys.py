"""Making a key with the scim scope: in the console, on the command line,
and what the management API says of it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from accounts.models import AdminApiKey, AuditEntry
from tests.admin_api.conftest import Scim

pytestmark = pytest.mark.django_db


def test_the_console_makes_a_key_with_the_scim_scope(as_user, crew):
    form = as_user("alice").get("/console/admin-keys/new/")
    assert 'name="scopes" value="scim"' in form.content.decode()
    page = as_user("alice").post(
        "/console/admin-keys/new/", {"name": "okta", "role": "admin", "scopes": ["scim"]}
    )
    assert page.status_code == 200
    key = AdminApiKey.objects.get(name="okta")
    assert key.scopes == ["scim"]
    raw = page.context["raw_key"]
    assert Scim(raw).get("/Users").status_code == 200
    entry = AuditEntry.objects.get(action="admin_key.create", target__startswith="okta")
    assert entry.details["scopes"] == ["scim"]
    listing = as_user("alice").get("/console/admin-keys/").content.decode()
    assert ">scim<" in listing


def test_the_console_refuses_an_unknown_scope(as_user):
    page = as_user("alice").post(
        "/console/admin-keys/new/", {"name": "odd", "role": "admin", "scopes": ["root"]}
    )
    assert page.status_code == 200
    assert not AdminApiKey.objects.filter(name="odd").exists()


def test_the_command_line_makes_a_key_with_the_scim_scope(crew):
    out = io.StringIO()
    call_command(
        "create_admin_key", "--org", "acme", "--name", "entra", "--scope", "scim", stdout=out
    )
    raw = out.getvalue().strip().splitlines()[-1]
    assert "scopes scim" in out.getvalue()
    assert Scim(raw).get("/ServiceProviderConfig").status_code == 200
    assert AdminApiKey.objects.get(name="entra").role == "admin"


def test_a_scope_outside_the_list_is_refused_by_the_service(crew):
    from django.core.exceptions import ValidationError

    from accounts.admin_keys import admin_key_create

    with pytest.raises(ValidationError) as refused:
        admin_key_create(organisation=crew["acme"], name="x", scopes=["root"])
    assert "scopes" in refused.value.message_dict


def test_the_management_api_shows_a_keys_scopes(scim_keys):
    from django.test import Client

    me = Client().get("/api/v1/admin/me", HTTP_AUTHORIZATION=f"Bearer {scim_keys['acme']}")
    assert me.status_code == 200
    assert me.json()["scopes"] == ["scim"]
