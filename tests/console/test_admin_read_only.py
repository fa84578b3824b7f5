"""The Django admin shows the rows the services own but never writes them:
every change goes through the console (or the API or a command), which
validates, audits and clears caches."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse


@pytest.fixture
def root(estates) -> Client:
    client = Client()
    client.force_login(
        User.objects.create_superuser("root@example.com", "root@example.com", "root-password-1")
    )
    return client


def _rows(crew, estates):
    """For each admin: its URL name prefix, a row, and the console page that edits the row."""
    from accounts.audit import Actor
    from accounts.models import AuditEntry, Membership
    from accounts.services.invitations import invitation_create
    from console.models import BackendHealthCheck

    acme = estates["acme"]
    invitation, _ = invitation_create(
        organisation=crew["acme"],
        actor=Actor.console(crew["alice"]),
        email="newcomer@example.com",
        role="developer",
    )
    check = BackendHealthCheck.objects.create(backend=acme.backend, ok=True)
    server = _mcp_server(crew)
    return [
        ("accounts_organisation", crew["acme"], reverse("console:settings")),
        (
            "accounts_membership",
            Membership.objects.get(user=crew["alice"]),
            reverse("console:members"),
        ),
        ("accounts_apikey", acme.key, reverse("console:key_edit", args=[acme.key.id])),
        ("accounts_invitation", invitation, reverse("console:members")),
        ("accounts_auditentry", AuditEntry.objects.first(), reverse("console:audit")),
        (
            "responses_api_backend",
            acme.backend,
            reverse("console:backend_edit", args=[acme.backend.id]),
        ),
        (
            "responses_api_servedmodel",
            acme.model,
            reverse("console:model_edit", args=[acme.model.id]),
        ),
        ("responses_api_usagelog", acme.row, reverse("console:trace", args=[acme.row.request_id])),
        ("console_backendhealthcheck", check, reverse("console:backend", args=[acme.backend.id])),
        (
            "responses_api_mcpserver",
            server,
            reverse("console:mcp_server_edit", args=[server.id]),
        ),
    ]


def _mcp_server(crew):
    from accounts.audit import CLI
    from responses_api.catalogue.services.mcp_servers import mcp_server_ensure

    server, _ = mcp_server_ensure(
        organisation=crew["acme"],
        label="wiki",
        actor=CLI,
        server_url="https://wiki.example/mcp",
        headers={"X-Api-Key": "admin-page-secret"},
        authorization="Bearer admin-page-token",
    )
    return server


def _snapshot(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def test_each_page_shows_the_row_and_links_to_the_console(root, crew, estates):
    for name, obj, console_url in _rows(crew, estates):
        listing = root.get(reverse(f"admin:{name}_changelist"))
        assert listing.status_code == 200, name
        assert f'href="{console_url}"' in listing.content.decode(), name
        page = root.get(reverse(f"admin:{name}_change", args=[obj.pk]))
        assert page.status_code == 200, name
        body = page.content.decode()
        assert f'href="{console_url}"' in body, name
        assert 'name="_save"' not in body, name


def test_adding_changing_and_deleting_are_refused(root, crew, estates):
    for name, obj, _ in _rows(crew, estates):
        model = type(obj)
        count = model.objects.count()
        obj.refresh_from_db()
        before = _snapshot(obj)
        form = {k: v for k, v in before.items() if v is not None}
        form.update({"name": "renamed", "slug": "renamed", "role": "viewer", "_save": "Save"})

        assert root.get(reverse(f"admin:{name}_add")).status_code == 403, name
        assert root.post(reverse(f"admin:{name}_add"), form).status_code == 403, name
        change = reverse(f"admin:{name}_change", args=[obj.pk])
        assert root.post(change, form).status_code == 403, name
        delete = reverse(f"admin:{name}_delete", args=[obj.pk])
        assert root.post(delete, {"post": "yes"}).status_code == 403, name
        root.post(
            reverse(f"admin:{name}_changelist"),
            {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"},
        )

        assert model.objects.count() == count, name
        obj.refresh_from_db()
        assert _snapshot(obj) == before, name


def test_an_mcp_servers_secrets_are_not_shown(root, crew, estates):
    server = _mcp_server(crew)
    body = root.get(reverse("admin:responses_api_mcpserver_change", args=[server.pk])).content
    assert b"wiki.example" in body
    for secret in ("admin-page-secret", "admin-page-token", server.headers_encrypted):
        assert secret.encode() not in body


def test_deployments_inside_a_model_page_are_read_only(root, estates):
    model = estates["acme"].model
    body = root.get(reverse("admin:responses_api_servedmodel_change", args=[model.pk])).content
    assert b"deployments-TOTAL_FORMS" in body  # the inline is there
    assert b'name="deployments-0-upstream_name"' not in body
    assert estates["acme"].backend.name.encode() in body


def test_the_user_admin_stays_writable_for_platform_staff(root, crew):
    """The console manages memberships, not accounts: ``is_staff`` is set here."""
    bob = crew["bob"]
    assert root.get(reverse("admin:auth_user_change", args=[bob.pk])).status_code == 200
    assert root.get(reverse("admin:auth_user_add")).status_code == 200
