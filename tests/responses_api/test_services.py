"""The backend and model services: one audit entry per change, field-keyed
ValidationErrors, the catalogue cache forgets the organisation, and the
upstream key never reaches the audit trail."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from accounts.audit import CLI, Actor
from accounts.models import AuditEntry
from responses_api.catalogue import catalog
from responses_api.catalogue.services.backends import (
    backend_create,
    backend_delete,
    backend_ensure,
    backend_update,
)
from responses_api.catalogue.services.served_models import (
    deployment_remove,
    deployment_set,
    model_create,
    model_delete,
    model_ensure,
    model_update,
)
from responses_api.models import Backend, Deployment, ServedModel
from responses_api.runtime.secrets import decrypt

pytestmark = pytest.mark.django_db


def _actions() -> list[str]:
    return list(AuditEntry.objects.order_by("id").values_list("action", flat=True))


@pytest.fixture
def gpu(people):
    return backend_create(
        organisation=people["acme"],
        actor=Actor.console(people["alice"]),
        name="gpu",
        base_url="http://vllm:8000/v1/",
        upstream_key="sk-up",
    )


def test_a_new_backend_is_audited_without_its_upstream_key(people, gpu):
    entry = AuditEntry.objects.get(action="backend.create")
    assert gpu.base_url == "http://vllm:8000/v1" and decrypt(gpu.api_key_encrypted) == "sk-up"
    assert entry.actor == people["alice"] and entry.details["upstream_key"] == "set"
    assert "sk-up" not in str(entry.details) and gpu.api_key_encrypted not in str(entry.details)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "gpu"}, "name"),
        ({"name": " "}, "name"),
        ({"base_url": "ftp://x/v1"}, "base_url"),
        ({"base_url": "http://has space/v1"}, "base_url"),
        ({"base_url": "http://x:port/v1"}, "base_url"),
        ({"dialect": "tgi-9000"}, "dialect"),
        ({"max_concurrency": -1}, "max_concurrency"),
    ],
)
def test_bad_backend_fields_are_refused_with_the_field_named(people, gpu, fields, field):
    values = {"name": "other", "base_url": "http://x/v1", **fields}
    with pytest.raises(ValidationError) as error:
        backend_create(organisation=people["acme"], actor=CLI, **values)
    assert field in error.value.message_dict
    assert Backend.objects.count() == 1


def test_another_organisation_may_reuse_a_backend_name(people, gpu):
    backend_create(organisation=people["globex"], actor=CLI, name="gpu", base_url="http://x/v1")
    assert Backend.objects.filter(name="gpu").count() == 2


def test_updating_a_backend_records_the_changed_fields_and_forgets_the_catalogue(people, gpu):
    catalog._cache[people["acme"].id] = (float("inf"), 0.0, None)
    backend_update(backend=gpu, actor=CLI, data={"max_concurrency": 4, "upstream_key": None})
    entry = AuditEntry.objects.get(action="backend.update")
    assert entry.details["changed"] == ["max_concurrency"]
    assert entry.details["upstream_key"] == "cleared"
    assert people["acme"].id not in catalog._cache
    gpu.refresh_from_db()
    assert (gpu.max_concurrency, gpu.api_key_encrypted) == (4, "")


def test_an_update_that_changes_nothing_writes_no_entry(gpu):
    backend_update(backend=gpu, actor=CLI, data={"base_url": gpu.base_url, "upstream_key": ""})
    assert _actions()[-1] == "backend.create"


def test_deleting_a_backend_is_audited(people, gpu):
    backend_delete(backend=gpu, actor=Actor.console(people["alice"]))
    assert not Backend.objects.exists()
    assert AuditEntry.objects.get(action="backend.delete").target == "gpu"


def test_a_model_with_its_first_backend_is_two_audited_changes(people, gpu):
    model = model_create(
        organisation=people["acme"],
        actor=Actor.console(people["alice"]),
        public_id="qwen3",
        aliases=["qwen"],
        price_output=Decimal("0.4"),
        backend=gpu,
        upstream_name="Qwen/Qwen3-8B",
    )
    assert Deployment.objects.get(model=model).upstream_name == "Qwen/Qwen3-8B"
    assert _actions()[-2:] == ["model.create", "model.deploy"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"public_id": "taken"}, "public_id"),
        ({"public_id": "alias-of-taken"}, "public_id"),
        ({"public_id": "has space"}, "public_id"),
        ({"aliases": ["taken"]}, "aliases"),
        ({"aliases": ["new"]}, "aliases"),
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_output_tokens": 10, "default_max_output_tokens": 20}, "default_max_output_tokens"),
        ({"context_window": 10, "max_output_tokens": 20}, "max_output_tokens"),
        ({"price_input": Decimal(-1)}, "price_input"),
        ({"context_window": 0}, "context_window"),
        ({"supports_vision": "yes"}, "supports_vision"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_model_fields_are_refused_with_the_field_named(people, fields, field):
    model_create(
        organisation=people["acme"], actor=CLI, public_id="taken", aliases=["alias-of-taken"]
    )
    with pytest.raises(ValidationError) as error:
        model_create(organisation=people["acme"], actor=CLI, **{"public_id": "new", **fields})
    assert field in error.value.message_dict
    assert ServedModel.objects.count() == 1


def test_updating_a_model_checks_the_result_as_a_whole(people):
    model = model_create(organisation=people["acme"], actor=CLI, public_id="m", context_window=1000)
    with pytest.raises(ValidationError) as error:
        model_update(model=model, actor=CLI, data={"max_output_tokens": 2000})
    assert "max_output_tokens" in error.value.message_dict
    model_update(model=model, actor=CLI, data={"aliases": ["m2"], "max_output_tokens": 500})
    model.refresh_from_db()
    assert model.aliases == ["m2"] and model.max_output_tokens == 500
    assert AuditEntry.objects.get(action="model.update").details["changed"] == [
        "aliases",
        "max_output_tokens",
    ]


def test_a_model_cannot_be_deployed_on_another_organisations_backend(people):
    foreign = backend_create(
        organisation=people["globex"], actor=CLI, name="g", base_url="http://x/v1"
    )
    model = model_create(organisation=people["acme"], actor=CLI, public_id="m")
    with pytest.raises(ValidationError) as error:
        deployment_set(model=model, backend=foreign, actor=CLI, upstream_name="m")
    assert "backend" in error.value.message_dict
    assert not Deployment.objects.exists()


def test_undeploying_and_deleting_a_model_are_audited(people, gpu):
    model = model_create(organisation=people["acme"], actor=CLI, public_id="m", backend=gpu)
    deployment_remove(model=model, backend=gpu, actor=CLI)
    deployment_remove(model=model, backend=gpu, actor=CLI)
    model_delete(model=model, actor=CLI)
    assert _actions()[-2:] == ["model.undeploy", "model.delete"]
    assert not ServedModel.objects.exists()


def test_the_ensure_functions_are_idempotent_and_audited_as_the_cli(people):
    for _ in range(2):
        backend, _ = backend_ensure(
            organisation=people["acme"], name="sim", base_url="http://127.0.0.1:9/v1"
        )
        model_ensure(organisation=people["acme"], public_id="m", backend=backend)
    assert _actions()[-3:] == ["backend.create", "model.create", "model.deploy"]
    assert AuditEntry.objects.filter(action__startswith="model.", source="cli").count() == 2


def test_a_shared_backend_is_audited_as_a_platform_change():
    backend, created = backend_ensure(organisation=None, name="shared", base_url="http://x/v1")
    entry = AuditEntry.objects.get(action="backend.create")
    assert created and entry.organisation is None and entry.source == "cli"


def test_a_backend_without_a_concurrency_limit_of_its_own_is_allowed(people):
    """0 means no limit of Switchyard's own: the backend queues for itself."""
    backend = backend_create(
        organisation=people["acme"],
        actor=CLI,
        name="open",
        base_url="http://open:8000/v1",
        max_concurrency=0,
    )
    assert backend.max_concurrency == 0
