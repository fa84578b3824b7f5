"""Tenancy of the API's objects: another organisation's backend, model or
usage row is a 404, exactly like a missing one; support staff read any usage
row, nobody else does."""

import uuid

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.http import Http404

from accounts.access import SUPPORT_GROUP
from accounts.models import Membership
from responses_api.access.objects import (
    backends_for_member,
    get_backend_for_member,
    get_model_for_member,
    get_usage_row_for_member,
    get_usage_row_for_support,
    usage_for_support,
)
from responses_api.catalogue.services.backends import backend_ensure
from responses_api.catalogue.services.served_models import model_ensure
from responses_api.models import Backend, UsageLog

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(people):
    objects = {}
    for slug in ("acme", "globex"):
        org = people[slug]
        backend, _ = backend_ensure(organisation=org, name=f"{slug}-gpu", base_url="http://x/v1")
        model, _ = model_ensure(organisation=org, public_id=f"{slug}-model", backend=backend)
        row = UsageLog.objects.create(
            request_id=uuid.uuid4(), organisation=org, endpoint="/v1/responses", status=200
        )
        objects[slug] = (backend, model, row)
    alice = Membership.objects.get(user=people["alice"], organisation=people["acme"])
    bob = Membership.objects.get(user=people["bob"], organisation=people["acme"])
    return objects, alice, bob


def test_alice_gets_her_organisations_objects(world):
    objects, alice, _ = world
    backend, model, row = objects["acme"]
    assert get_backend_for_member(membership=alice, backend_id=backend.id, manage=True) == backend
    assert get_model_for_member(membership=alice, model_id=str(model.id), manage=True) == model
    assert get_usage_row_for_member(membership=alice, request_id=row.request_id) == row


@pytest.mark.parametrize("kind", ["backend", "model", "usage"])
def test_another_organisations_object_is_a_404_like_a_missing_one(world, kind):
    objects, alice, _ = world
    backend, model, row = objects["globex"]
    lookups = {
        "backend": lambda value: get_backend_for_member(membership=alice, backend_id=value),
        "model": lambda value: get_model_for_member(membership=alice, model_id=value),
        "usage": lambda value: get_usage_row_for_member(membership=alice, request_id=value),
    }
    theirs = {"backend": backend.id, "model": model.id, "usage": row.request_id}[kind]
    for value in (theirs, uuid.uuid4(), "not-a-uuid"):
        with pytest.raises(Http404):
            lookups[kind](value)


def test_a_developer_sees_backends_and_models_but_may_not_manage_them(world):
    objects, _, bob = world
    backend, model, _ = objects["acme"]
    assert get_backend_for_member(membership=bob, backend_id=backend.id) == backend
    with pytest.raises(PermissionDenied):
        get_backend_for_member(membership=bob, backend_id=backend.id, manage=True)
    with pytest.raises(PermissionDenied):
        get_model_for_member(membership=bob, model_id=model.id, manage=True)


def test_shared_backends_are_listed_for_everyone_but_managed_by_nobody(world):
    _, alice, _ = world
    shared = Backend.objects.create(organisation=None, name="shared", base_url="http://x/v1")
    assert shared in backends_for_member(membership=alice)
    with pytest.raises(PermissionDenied):
        get_backend_for_member(membership=alice, backend_id=shared.id, manage=True)


def test_only_support_staff_read_any_organisations_usage(world, people):
    objects, _, _ = world
    row = objects["globex"][2]
    sam = User.objects.create_user("sam@example.com", "sam@example.com", "x")
    sam.groups.add(Group.objects.get_or_create(name=SUPPORT_GROUP)[0])
    assert get_usage_row_for_support(user=sam, request_id=row.request_id) == row
    for outsider in (people["alice"], AnonymousUser()):
        with pytest.raises(Http404):
            usage_for_support(user=outsider)
