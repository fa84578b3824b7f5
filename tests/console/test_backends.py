"""Backends in the console: the upstream key is write-only; "test
connection" calls the backend now and leaves a health history."""

import pytest
from django.urls import reverse

from accounts.models import AuditEntry
from console.models import BackendHealthCheck
from responses_api.models import Backend
from responses_api.runtime.secrets import decrypt

pytestmark = pytest.mark.django_db

FORM = {
    "name": "gpu2",
    "base_url": "http://gpu2.internal:8000/v1/",
    "dialect": "vllm",
    "max_concurrency": "8",
    "enabled": "on",
}


def test_adding_a_backend_encrypts_the_upstream_key_and_never_shows_it(as_user, crew):
    client = as_user("erin")
    response = client.post(
        reverse("console:backend_create"), {**FORM, "upstream_key": "sk-upstream-123"}
    )
    backend = Backend.objects.get(name="gpu2")
    assert response.status_code == 302 and response.url == reverse(
        "console:backend", args=[backend.id]
    )
    assert (
        backend.organisation == crew["acme"] and backend.base_url == "http://gpu2.internal:8000/v1"
    )
    assert backend.api_key_encrypted != "sk-upstream-123"
    assert decrypt(backend.api_key_encrypted) == "sk-upstream-123"
    for url in (
        reverse("console:backend", args=[backend.id]),
        reverse("console:backend_edit", args=[backend.id]),
    ):
        body = client.get(url).content.decode()
        assert "sk-upstream-123" not in body and backend.api_key_encrypted not in body
    entry = AuditEntry.objects.get(action="backend.create")
    assert "sk-upstream-123" not in str(entry.details)


def test_editing_without_a_key_keeps_the_stored_one_and_clearing_removes_it(as_user, estates):
    client = as_user("alice")
    backend = estates["acme"].backend
    client.post(reverse("console:backend_edit", args=[backend.id]), {**FORM, "name": "acme-gpu"})
    backend.refresh_from_db()
    assert decrypt(backend.api_key_encrypted) == "up-secret" and backend.dialect == "vllm"
    client.post(
        reverse("console:backend_edit", args=[backend.id]),
        {**FORM, "name": "acme-gpu", "clear_upstream_key": "on"},
    )
    backend.refresh_from_db()
    assert backend.api_key_encrypted == ""


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"base_url": "ftp://x/v1"}, "base_url"),
        ({"base_url": "not a url"}, "base_url"),
        ({"max_concurrency": "0"}, "max_concurrency"),
        ({"name": "acme-gpu"}, "name"),
        ({"dialect": "tgi-9000"}, "dialect"),
    ],
)
def test_invalid_backend_forms_are_refused_with_a_message(as_user, estates, change, field):
    response = as_user("alice").post(reverse("console:backend_create"), {**FORM, **change})
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not Backend.objects.filter(
        name=change.get("name", "gpu2"), base_url__startswith="http://gpu2"
    ).exists()


@pytest.mark.live
def test_test_connection_reports_latency_and_models_and_records_history(as_user, crew, simulator):
    from responses_api.catalogue.services.backends import backend_ensure

    backend, _ = backend_ensure(organisation=crew["acme"], name="sim", base_url=simulator.url)
    client = as_user("alice")
    response = client.post(
        reverse("console:backend_test", args=[backend.id]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Connected" in body and "sim-model" in body
    assert 'id="backend-live"' in body and "<html" not in body
    assert "Online" in body and "Test connection</td>" in body  # health card and history row
    check = BackendHealthCheck.objects.get(backend=backend)
    assert check.ok and check.latency_ms is not None and "sim-model" in check.reported_models
    assert check.source == "console"
    backend.refresh_from_db()
    assert backend.health == "online"
    page = client.get(reverse("console:backend", args=[backend.id])).content.decode()
    assert "Test connection" in page and "online" in page


def test_test_connection_to_a_dead_backend_says_so(as_user, estates):
    backend = estates["acme"].backend  # port 9: nothing listens
    response = as_user("alice").post(
        reverse("console:backend_test", args=[backend.id]), HTTP_HX_REQUEST="true"
    )
    assert "No connection" in response.content.decode()
    assert BackendHealthCheck.objects.get(backend=backend).ok is False


def test_the_periodic_check_records_history(estates):
    from console.tasks import check_backends

    check_backends()
    assert (
        BackendHealthCheck.objects.filter(
            backend=estates["acme"].backend, source="schedule"
        ).count()
        == 1
    )


def test_shared_backends_are_listed_but_not_editable(as_user, estates):
    shared = Backend.objects.create(
        organisation=None, name="platform-gpu", base_url="http://127.0.0.1:9/v1"
    )
    client = as_user("alice")
    assert "platform-gpu" in client.get(reverse("console:backends")).content.decode()
    assert client.get(reverse("console:backend_edit", args=[shared.id])).status_code == 403


def test_the_add_form_shows_only_what_a_new_backend_takes(as_user, estates):
    client = as_user("erin")
    created = client.get(reverse("console:backend_create")).content.decode()
    assert 'name="upstream_key"' in created
    assert "clear_upstream_key" not in created and "keep the current one" not in created
    edited = client.get(reverse("console:backend_edit", args=[estates["acme"].backend.id]))
    body = edited.content.decode()
    assert 'name="clear_upstream_key"' in body and "keep the current one" in body


@pytest.mark.parametrize("allowed", [True, False])
def test_the_private_address_flag_says_what_it_adds_to_the_setting(client, crew, settings, allowed):
    from django.contrib.auth.models import User

    from accounts.services.members import member_ensure

    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = allowed
    root = User.objects.create_superuser("root@example.com", "root@example.com", "root-pass-1")
    member_ensure(organisation=crew["acme"], email="root@example.com", role="owner")
    client.force_login(root)
    body = client.get(reverse("console:backend_create")).content.decode()
    assert 'name="allow_private"' in body
    already = "already allowed on this platform (SWITCHYARD_BACKEND_ALLOW_PRIVATE)"
    assert (already in body) is allowed
    assert ("which the platform otherwise refuses" in body) is not allowed
    assert "link-local" in body
