"""Cross-tenant attempts: an owner or admin of Acme reaching for Globex's
objects gets the same 404 as for an object that does not exist."""

import re
import uuid

import pytest
from django.urls import reverse

from accounts.models import ApiKey, AuditEntry
from responses_api.models import Backend, Deployment, ServedModel

pytestmark = pytest.mark.django_db


def _missing_and_foreign(client, name: str, foreign_id, **extra):
    """GET the foreign object and a random id: both 404, same body."""
    foreign = client.get(reverse(name, kwargs={**extra, **foreign_id}))
    missing_kwargs = {**extra, **{k: uuid.uuid4() for k in foreign_id}}
    missing = client.get(reverse(name, kwargs=missing_kwargs))
    assert foreign.status_code == 404
    assert missing.status_code == 404
    assert _unmasked(foreign.content) == _unmasked(missing.content)


def _unmasked(body: bytes) -> bytes:
    """The page without its CSRF tokens, which differ on every render."""
    return re.sub(rb'(X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]+', rb"\1", body)


@pytest.mark.parametrize("who", ["alice", "erin"])
def test_pages_of_another_organisations_objects_are_404_like_missing_ones(as_user, estates, who):
    globex = estates["globex"]
    client = as_user(who)
    _missing_and_foreign(client, "console:key_revoke", {"key_id": globex.key.id})
    _missing_and_foreign(client, "console:backend", {"backend_id": globex.backend.id})
    _missing_and_foreign(client, "console:backend_edit", {"backend_id": globex.backend.id})
    _missing_and_foreign(client, "console:model_edit", {"model_id": globex.model.id})
    _missing_and_foreign(client, "console:trace", {"request_id": globex.row.request_id})


def test_posting_to_another_organisations_forms_changes_nothing(as_user, estates, crew):
    globex = estates["globex"]
    client = as_user("alice")
    posts = [
        reverse("console:key_revoke", args=[globex.key.id]),
        reverse("console:backend_edit", args=[globex.backend.id]),
        reverse("console:backend_test", args=[globex.backend.id]),
        reverse("console:model_edit", args=[globex.model.id]),
        reverse("console:model_deploy", args=[globex.model.id]),
        reverse("console:model_undeploy", args=[globex.model.id, globex.backend.id]),
        reverse("console:member_role", args=[crew["charlie"].memberships.get().public_id]),
        reverse("console:member_remove", args=[crew["charlie"].memberships.get().public_id]),
    ]
    payload = {
        "name": "stolen",
        "base_url": "http://evil.example/v1",
        "dialect": "openai",
        "max_concurrency": 1,
        "public_id": "stolen",
        "price_input": 0,
        "price_cached_input": 0,
        "price_output": 0,
        "role": "viewer",
        "deploy-backend": str(estates["acme"].backend.id),
        "deploy-upstream_name": "x",
    }
    for url in posts:
        assert client.post(url, payload).status_code == 404, url
    assert ApiKey.objects.get(pk=globex.key.pk).revoked_at is None
    backend = Backend.objects.get(pk=globex.backend.pk)
    assert backend.name == "globex-gpu" and backend.base_url == "http://127.0.0.1:9/v1"
    assert ServedModel.objects.get(pk=globex.model.pk).public_id == "globex-model"
    assert Deployment.objects.filter(model=globex.model).count() == 1
    assert crew["charlie"].memberships.get().role == "owner"
    assert not AuditEntry.objects.filter(organisation=crew["globex"], source="console").exists()


def test_a_model_cannot_be_deployed_on_another_organisations_backend(as_user, estates):
    client = as_user("alice")
    acme, globex = estates["acme"], estates["globex"]
    response = client.post(
        reverse("console:model_deploy", args=[acme.model.id]),
        {"deploy-backend": str(globex.backend.id), "deploy-upstream_name": "x"},
    )
    assert response.status_code == 302
    assert not Deployment.objects.filter(model=acme.model, backend=globex.backend).exists()


def test_lists_show_only_the_current_organisations_objects(as_user, estates):
    client = as_user("alice")
    globex = estates["globex"]
    for name in ("console:keys", "console:backends", "console:models", "console:usage"):
        body = client.get(reverse(name)).content.decode()
        assert "globex" not in body.lower(), name
    assert str(globex.row.request_id) not in client.get(reverse("console:usage")).content.decode()


def test_the_search_box_does_not_find_another_organisations_request(as_user, estates):
    client = as_user("alice")
    foreign = client.get(
        reverse("console:trace_search"), {"q": str(estates["globex"].row.request_id)}
    )
    missing = client.get(reverse("console:trace_search"), {"q": str(uuid.uuid4())})
    assert foreign.status_code == missing.status_code == 404
    assert "globex" not in foreign.content.decode().lower()


def test_csv_export_holds_only_the_current_organisations_rows(as_user, estates):
    response = as_user("alice").get(reverse("console:usage_export"))
    body = b"".join(response.streaming_content).decode()
    assert str(estates["acme"].row.request_id) in body
    assert str(estates["globex"].row.request_id) not in body


def test_the_dashboard_counts_only_the_current_organisation(as_user, estates):
    from tests.console.conftest import usage_row

    for _ in range(3):
        usage_row(estates["globex"].row.organisation)
    response = as_user("alice").get(reverse("console:dashboard"))
    assert response.context["data"].totals["requests"] == 1
    assert [r["model"] for r in response.context["data"].by_model] == ["acme-model"]


def test_switching_to_an_organisation_one_is_not_in_is_refused(as_user, crew):
    client = as_user("alice")
    foreign = crew["charlie"].memberships.get().public_id
    assert client.post(reverse("console:switch"), {"membership": foreign}).status_code == 404
    assert (
        client.get(reverse("console:dashboard")).context["request"].console.organisation
        == crew["acme"]
    )
