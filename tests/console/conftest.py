"""Console fixtures: the three people of tests/conftest.py plus an admin, a
viewer and a support person, and a little of everything in both
organisations."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone


@pytest.fixture
def crew(people):
    from accounts.access import SUPPORT_GROUP
    from accounts.services.members import member_ensure

    acme = people["acme"]
    erin, _ = member_ensure(
        organisation=acme, email="erin@example.com", role="admin", password="erin-password-1"
    )
    dave, _ = member_ensure(
        organisation=acme, email="dave@example.com", role="viewer", password="dave-password-1"
    )
    sam = User.objects.create_user("sam@example.com", "sam@example.com", "sam-password-1")
    sam.groups.add(Group.objects.get_or_create(name=SUPPORT_GROUP)[0])
    return {**people, "erin": erin.user, "dave": dave.user, "sam": sam}


def usage_row(organisation, **fields):
    """A usage row written as the API's rows are (``usage.write_rows``), so
    that the roll-ups count it too."""
    from responses_api.models import UsageLog
    from responses_api.usage.writer import write_rows

    values = {
        "request_id": uuid.uuid4(),
        "organisation": organisation,
        "endpoint": "/v1/responses",
        "model": "sim-model",
        "status": 200,
        "input_tokens": 10,
        "output_tokens": 20,
        "ttft_ms": 120.0,
        "queue_wait_ms": 5.0,
        "duration_ms": 400.0,
        "created_at": timezone.now() - timedelta(minutes=5),
    }
    values.update(fields)
    row = {
        "organisation_id": values.pop("organisation").id,
        "created_at": values.pop("created_at").timestamp(),
        "request_id": str(values.pop("request_id")),
    }
    for name in ("api_key", "backend"):
        if name in values:
            related = values.pop(name)
            row[f"{name}_id"] = str(related.pk) if related is not None else None
    row.update(values)
    assert write_rows([row]) == []
    return UsageLog.objects.get(request_id=row["request_id"])


@dataclass
class Estate:
    backend: object
    model: object
    key: object
    raw_key: str
    row: object


def _estate(org, owner, name: str) -> Estate:
    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    backend, _ = backend_ensure(
        organisation=org, name=f"{name}-gpu", base_url="http://127.0.0.1:9/v1", api_key="up-secret"
    )
    model, _ = model_ensure(organisation=org, public_id=f"{name}-model", backend=backend)
    key, raw = api_key_create(organisation=org, name=f"{name} key", created_by=owner)
    row = usage_row(org, api_key=key, key_prefix=key.prefix, model=model.public_id, backend=backend)
    return Estate(backend, model, key, raw, row)


@pytest.fixture
def estates(crew):
    """Acme's and Globex's backend, model, key and one usage row each."""
    return {
        "acme": _estate(crew["acme"], crew["alice"], "acme"),
        "globex": _estate(crew["globex"], crew["charlie"], "globex"),
    }


@pytest.fixture
def as_user(crew):
    def login(name: str) -> Client:
        client = Client()
        client.force_login(crew[name])
        return client

    return login
