"""Stored-response fixtures: Acme stores responses, Globex stores them too
(so that its answers for Acme's ids are the tenancy check), and a ZDR
organisation stores nothing. Their backend is the simulator, behind a
recorder that keeps every chat request it relays; both run on threads of
the test's process, and the API answers in-process (``tests.inprocess``).
Stored responses are written on connections of their own (the event
loop's, the store's worker thread), so these tests commit what they set
up (``transaction=True``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI

from accounts.services.organisations import organisation_ensure, organisation_settings_update
from tests.store.recorder import Recorder


@pytest.fixture
def recorder(local_simulator) -> Iterator[Recorder]:
    rec = Recorder(local_simulator.url)
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


@pytest.fixture
def client(gateway, acme) -> OpenAI:
    return gateway.openai(acme.key)
