"""Stored-response fixtures: Acme stores responses, Globex stores them too
(so that its answers for Acme's ids are the tenancy check), and a ZDR
organisation stores nothing. Their backend is the simulator, behind a
recorder that keeps every chat request it relays."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI

from accounts.services.organisations import organisation_ensure, organisation_settings_update
from tests.store.recorder import Recorder


@pytest.fixture
def recorder(simulator) -> Iterator[Recorder]:
    rec = Recorder(simulator.url)
    yield rec
    rec.stop()


def store_policy(org, hours: int = 24):
    from accounts.audit import CLI

    return organisation_settings_update(
        organisation=org,
        actor=CLI,
        data={"retention_policy": "store", "store_ttl_hours": hours},
    )


@pytest.fixture
def acme(provision, recorder, people):
    store_policy(people["acme"])
    return provision("acme", recorder.url, dialect="vllm")


@pytest.fixture
def globex(provision, recorder, people):
    store_policy(people["globex"])
    return provision("globex", recorder.url, dialect="vllm")


@pytest.fixture
def initech(provision, recorder, people):
    """An organisation with the default policy: zero data retention."""
    people["initech"] = organisation_ensure(slug="initech", name="Initech")[0]
    return provision("initech", recorder.url, dialect="vllm")


def sdk(server, tenant) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key=tenant.key, max_retries=0)


@pytest.fixture
def client(api_server, acme) -> OpenAI:
    return sdk(api_server, acme)
