"""Precise mode's two backend fields through every write path: the service
checks them and keeps them platform staff's, the management API shows them
and refuses an organisation admin's, ``apply -f`` sets them."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command

from accounts.audit import CLI, Actor
from accounts.models import AuditEntry
from responses_api.catalogue import catalog
from responses_api.catalogue.services.backends import backend_create, backend_update
from responses_api.models import Backend
from tests.admin_api.conftest import ADMIN, admin_keys, api, error_of  # noqa: F401
from tests.console.conftest import as_user, crew  # noqa: F401

PRECISE = {"kv_events_endpoint": "tcp://vllm1:5557", "tokenizer_path": "/models/llama"}


def _create(organisation, *, actor: Actor = CLI, dialect: str = "vllm", **extra) -> Backend:
    return backend_create(
        organisation=organisation,
        actor=actor,
        name="gpu",
        base_url="http://gpu1.internal:8000/v1",
        dialect=dialect,
        **extra,
    )


@pytest.mark.django_db
def test_staff_set_both_fields_and_the_catalogue_carries_them(people):
    backend = _create(people["acme"], **PRECISE)
    assert backend.kv_events_endpoint == "tcp://vllm1:5557"
    entry = catalog._backend_entry(backend, set())  # noqa: SLF001
    assert entry.kv_events_endpoint == "tcp://vllm1:5557"
    assert entry.tokenizer_path == "/models/llama"
    audited = AuditEntry.objects.filter(action="backend.create").latest("created_at")
    assert audited.details["kv_events_endpoint"] == "tcp://vllm1:5557"
    cleared = {"kv_events_endpoint": "", "tokenizer_path": ""}
    backend_update(backend=backend, actor=CLI, data=cleared)
    backend.refresh_from_db()
    assert backend.kv_events_endpoint == backend.tokenizer_path == ""


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("values", "dialect", "field"),
    [
        ({"kv_events_endpoint": "http://vllm1:5557", "tokenizer_path": "/m"}, "vllm", "kv"),
        ({"kv_events_endpoint": "tcp://vllm1:5557", "tokenizer_path": "models"}, "vllm", "tok"),
        ({"kv_events_endpoint": "tcp://vllm1:5557"}, "vllm", "tok"),
        ({"tokenizer_path": "/models/llama"}, "vllm", "tok"),
        (PRECISE, "openai", "kv"),
    ],
)
def test_malformed_or_partial_settings_are_refused(people, values, dialect, field):
    with pytest.raises(ValidationError) as caught:
        _create(people["acme"], dialect=dialect, **values)
    named = {"kv": "kv_events_endpoint", "tok": "tokenizer_path"}[field]
    assert named in caught.value.message_dict


@pytest.mark.django_db
def test_an_organisation_admin_may_neither_set_nor_change_them(people):
    alice = Actor.console(people["alice"])
    with pytest.raises(ValidationError) as caught:
        _create(people["acme"], actor=alice, **PRECISE)
    assert set(caught.value.message_dict) == set(PRECISE)
    backend = _create(people["acme"], **PRECISE)
    with pytest.raises(ValidationError):
        backend_update(backend=backend, actor=alice, data={"tokenizer_path": "/etc"})
    # Other fields stay the admin's.
    backend_update(backend=backend, actor=alice, data={"max_concurrency": 3})
    backend.refresh_from_db()
    assert backend.max_concurrency == 3 and backend.tokenizer_path == "/models/llama"


@pytest.mark.django_db
def test_the_rest_api_shows_them_and_refuses_an_admins(api):  # noqa: F811
    client = api("acme")
    body = {"name": "gpu9", "base_url": "http://gpu9/v1", "dialect": "vllm", **PRECISE}
    refused = client.post(f"{ADMIN}/backends", body, format="json")
    assert refused.status_code == 400
    assert error_of(refused)["param"] in PRECISE
    made = client.post(
        f"{ADMIN}/backends", {"name": "gpu9", "base_url": "http://gpu9/v1"}, format="json"
    )
    assert made.status_code == 201
    assert made.json()["kv_events_endpoint"] == made.json()["tokenizer_path"] == ""


@pytest.mark.django_db
def test_apply_sets_them(people, tmp_path):
    document = {
        "organisations": [
            {
                "slug": "acme",
                "backends": [
                    {
                        "name": "vllm1",
                        "base_url": "http://vllm1.internal:8000/v1",
                        "dialect": "vllm",
                        **PRECISE,
                    }
                ],
            }
        ]
    }
    path = tmp_path / "switchyard.yaml"
    path.write_text(yaml.safe_dump(document))
    call_command("apply", "-f", str(path), stdout=io.StringIO())
    backend = Backend.objects.get(name="vllm1")
    assert backend.kv_events_endpoint == "tcp://vllm1:5557"
    assert backend.tokenizer_path == "/models/llama"
    # Applied again, unchanged: nothing to do.
    out = io.StringIO()
    call_command("apply", "-f", str(path), stdout=out)
    assert " 0 update" in out.getvalue()


@pytest.mark.django_db
def test_the_console_offers_them_to_staff_only(client, crew, as_user):  # noqa: F811
    from django.contrib.auth.models import User
    from django.urls import reverse

    from accounts.services.members import member_ensure

    owner = as_user("alice").get(reverse("console:backend_create")).content.decode()
    assert 'name="base_url"' in owner
    assert 'name="kv_events_endpoint"' not in owner and 'name="tokenizer_path"' not in owner
    root = User.objects.create_superuser("root@example.com", "root@example.com", "root-pass-1")
    member_ensure(organisation=crew["acme"], email="root@example.com", role="owner")
    client.force_login(root)
    assert (
        'name="kv_events_endpoint"'
        in client.get(reverse("console:backend_create")).content.decode()
    )
    posted = client.post(
        reverse("console:backend_create"),
        {
            "name": "gpu5",
            "base_url": "http://gpu5.internal:8000/v1",
            "dialect": "vllm",
            "max_concurrency": 4,
            "enabled": "on",
            **PRECISE,
        },
    )
    assert posted.status_code == 302
    backend = Backend.objects.get(name="gpu5")
    assert backend.kv_events_endpoint == "tcp://vllm1:5557"
    assert backend.tokenizer_path == "/models/llama"
