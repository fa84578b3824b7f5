"""Tenancy of accounts' objects: another organisation's key, member or
invitation is a 404, exactly like a missing one."""

import uuid

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from accounts.access import (
    get_api_key_for_member,
    get_invitation_for_member,
    get_membership_for_member,
)
from accounts.audit import CLI
from accounts.models import Membership
from accounts.services.api_keys import api_key_create
from accounts.services.invitations import invitation_create

pytestmark = pytest.mark.django_db


def _membership(people, name, slug):
    return Membership.objects.get(user=people[name], organisation=people[slug])


def test_charlies_key_member_and_invitation_are_404s_for_alice(people):
    alice = _membership(people, "alice", "acme")
    charlie = _membership(people, "charlie", "globex")
    key, _ = api_key_create(organisation=people["globex"], name="theirs")
    invitation, _ = invitation_create(
        organisation=people["globex"], actor=CLI, email="x@example.com", role="viewer"
    )
    for theirs in (key.id, uuid.uuid4(), "junk"):
        with pytest.raises(Http404):
            get_api_key_for_member(membership=alice, key_id=theirs)
    for theirs in (charlie.public_id, uuid.uuid4()):
        with pytest.raises(Http404):
            get_membership_for_member(membership=alice, member_id=theirs)
    with pytest.raises(Http404):
        get_invitation_for_member(membership=alice, invitation_id=invitation.id)


def test_a_developer_revokes_only_their_own_keys(people):
    bob = _membership(people, "bob", "acme")
    own, _ = api_key_create(organisation=people["acme"], name="bob's", created_by=people["bob"])
    other, _ = api_key_create(organisation=people["acme"], name="ci")
    assert get_api_key_for_member(membership=bob, key_id=own.id, revoke=True) == own
    with pytest.raises(PermissionDenied):
        get_api_key_for_member(membership=bob, key_id=other.id, revoke=True)
