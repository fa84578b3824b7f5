"""The model catalogue: add, edit, deploy on backends, with validation, and
the API's catalogue cache forgets the organisation at once."""

import re

import pytest
from django.urls import reverse

from responses_api.catalogue import catalog
from responses_api.models import Deployment, ServedModel

pytestmark = pytest.mark.django_db

FORM = {
    "public_id": "qwen3-32b",
    "aliases": "qwen, qwen3",
    "context_window": "32768",
    "max_output_tokens": "8192",
    "default_max_output_tokens": "2048",
    "temperature": "0.6",
    "top_p": "0.95",
    "supports_reasoning": "on",
    "price_input": "0.10",
    "price_cached_input": "0.05",
    "price_output": "0.40",
}


def test_adding_a_model_with_its_first_backend(as_user, estates):
    acme = estates["acme"]
    catalog._cache[acme.model.organisation_id] = (float("inf"), 0.0, None)
    response = as_user("alice").post(
        reverse("console:model_create"),
        {**FORM, "deploy-backend": str(acme.backend.id), "deploy-upstream_name": "Qwen/Qwen3-32B"},
    )
    model = ServedModel.objects.get(public_id="qwen3-32b")
    assert response.status_code == 302
    assert model.aliases == ["qwen", "qwen3"] and model.context_window == 32768
    assert model.temperature == 0.6 and str(model.price_output) == "0.400000"
    assert Deployment.objects.get(model=model).upstream_name == "Qwen/Qwen3-32B"
    assert acme.model.organisation_id not in catalog._cache
    listing = as_user("dave").get(reverse("console:models")).content.decode()
    assert "qwen3-32b" in listing and "Qwen/Qwen3-32B" in listing


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"public_id": "acme-model"}, "public_id"),
        ({"public_id": "has space"}, "public_id"),
        ({"aliases": "acme-model"}, "aliases"),
        ({"temperature": "2.5"}, "temperature"),
        ({"top_p": "0"}, "top_p"),
        ({"default_max_output_tokens": "9000"}, "default_max_output_tokens"),
        ({"max_output_tokens": "40000"}, "max_output_tokens"),
        ({"price_input": "-1"}, "price_input"),
        ({"context_window": "0"}, "context_window"),
    ],
)
def test_invalid_model_forms_are_refused_with_a_message(as_user, estates, change, field):
    acme = estates["acme"]
    data = {**FORM, **change, "deploy-backend": str(acme.backend.id), "deploy-upstream_name": "x"}
    response = as_user("alice").post(reverse("console:model_create"), data)
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert ServedModel.objects.count() == 2


def test_editing_and_undeploying_a_model(as_user, estates):
    client = as_user("erin")
    acme = estates["acme"]
    url = reverse("console:model_edit", args=[acme.model.id])
    assert client.post(url, {**FORM, "public_id": "acme-model", "aliases": ""}).status_code == 302
    acme.model.refresh_from_db()
    assert acme.model.context_window == 32768
    client.post(reverse("console:model_undeploy", args=[acme.model.id, acme.backend.id]))
    assert not Deployment.objects.filter(model=acme.model).exists()
    client.post(
        reverse("console:model_deploy", args=[acme.model.id]),
        {"deploy-backend": str(acme.backend.id), "deploy-upstream_name": "Other/Name"},
    )
    assert Deployment.objects.get(model=acme.model).upstream_name == "Other/Name"


def test_a_viewer_sees_a_model_read_only_and_cannot_post(as_user, estates):
    client = as_user("dave")
    url = reverse("console:model_edit", args=[estates["acme"].model.id])
    page = client.get(url).content.decode()
    assert "Read only" in page and '<form method="post" class="form"' not in page
    assert client.post(url, FORM).status_code == 403


def test_the_model_form_sets_vision_and_the_reasoning_levels(as_user, estates):
    acme = estates["acme"]
    response = as_user("alice").post(
        reverse("console:model_create"),
        {
            **FORM,
            "supports_vision": "on",
            "reasoning_levels": ["low", "high"],
            "default_reasoning_effort": "high",
            "deploy-backend": str(acme.backend.id),
            "deploy-upstream_name": "Qwen/Qwen3-32B",
        },
    )
    assert response.status_code == 302
    model = ServedModel.objects.get(public_id="qwen3-32b")
    assert model.supports_vision
    assert (model.effort_levels(), model.effort_default()) == (["low", "high"], "high")
    edit = as_user("alice").get(reverse("console:model_edit", args=[model.id])).content.decode()
    ticked = set(re.findall(r'name="reasoning_levels" value="(\w+)"[^>]*checked', edit))
    assert ticked == {"low", "high"}
