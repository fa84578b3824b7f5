"""A model's kind (``generate`` or ``embed``) through each of the three
ways the catalogue is written: the console, the management API and
``manage.py apply``, each through the same service function and its audit."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from accounts.models import AuditEntry
from responses_api.catalogue.services.served_models import model_update
from responses_api.models import ServedModel
from tests.admin_api.conftest import ADMIN, admin_keys, api, error_of  # noqa: F401
from tests.console.conftest import as_user, crew, estates  # noqa: F401

pytestmark = pytest.mark.django_db


def test_the_console_adds_an_embedding_model(as_user, estates):  # noqa: F811
    acme = estates["acme"]
    form = {
        "public_id": "bge-small",
        "kind": "embed",
        "context_window": "512",
        "price_input": "0.02",
        "price_cached_input": "0",
        "price_output": "0",
        "deploy-backend": str(acme.backend.id),
        "deploy-upstream_name": "BAAI/bge-small-en",
    }
    response = as_user("alice").post(reverse("console:model_create"), form)
    assert response.status_code == 302, response.content
    assert ServedModel.objects.get(public_id="bge-small").kind == "embed"
    listing = as_user("alice").get(reverse("console:models")).content.decode()
    assert "embeddings" in listing


def test_the_management_api_sets_and_changes_the_kind(api, estates):  # noqa: F811
    client = api("acme")
    created = client.post(f"{ADMIN}/models", {"public_id": "e5", "kind": "embed"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["kind"] == "embed"
    model_id = created.json()["id"]
    changed = client.patch(f"{ADMIN}/models/{model_id}", {"kind": "generate"}, format="json")
    assert changed.json()["kind"] == "generate"
    update = AuditEntry.objects.filter(action="model.update", target="e5").get()
    assert update.details["changed"] == ["kind"]
    refused = client.post(f"{ADMIN}/models", {"public_id": "x", "kind": "rerank"}, format="json")
    assert refused.status_code == 400 and error_of(refused)["param"] == "kind"
    assert client.get(f"{ADMIN}/models/{estates['acme'].model.id}").json()["kind"] == "generate"


def test_apply_declares_an_embedding_model_and_then_changes_nothing(tmp_path, people):
    document = {
        "organisations": [
            {
                "slug": "initech",
                "name": "Initech",
                "backends": [{"name": "gpu", "base_url": "http://gpu:8000/v1"}],
                "models": [
                    {
                        "public_id": "embedder",
                        "kind": "embed",
                        "deployments": [{"backend": "gpu", "upstream_name": "bge"}],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "switchyard.yaml"
    path.write_text(yaml.safe_dump(document))

    def apply() -> str:
        out = io.StringIO()
        call_command("apply", "-f", str(path), stdout=out)
        return out.getvalue()

    apply()
    assert ServedModel.objects.get(public_id="embedder").kind == "embed"
    assert "0 update" in apply()


def test_the_service_refuses_an_unknown_kind(estates):  # noqa: F811
    from accounts.audit import CLI

    with pytest.raises(ValidationError) as refused:
        model_update(model=estates["acme"].model, actor=CLI, data={"kind": "rerank"})
    assert "kind" in refused.value.message_dict


def test_codex_is_offered_no_embedding_model(estates):  # noqa: F811
    from accounts.models import ApiKey
    from responses_api.catalogue import codex_kit
    from responses_api.catalogue.services.served_models import model_ensure

    acme = estates["acme"]
    model_ensure(
        organisation=acme.model.organisation,
        public_id="embedder",
        backend=acme.backend,
        kind="embed",
    )
    key = ApiKey.objects.filter(organisation=acme.model.organisation).first()
    offered = {m.public_id for m in codex_kit.usable_models(key)}
    assert acme.model.public_id in offered and "embedder" not in offered


def test_add_model_marks_an_embedding_model(estates):  # noqa: F811
    acme = estates["acme"]
    call_command(
        "add_model",
        "bge",
        "--org",
        acme.model.organisation.slug,
        "--backend",
        acme.backend.name,
        "--kind",
        "embed",
        stdout=io.StringIO(),
    )
    assert ServedModel.objects.get(public_id="bge").kind == "embed"
