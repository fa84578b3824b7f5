"""The accounts services: each change leaves one audit entry naming its
actor and door, bad input is a field-keyed ValidationError, and the rules
about owners hold whoever calls."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from accounts.audit import CLI, Actor
from accounts.models import ApiKey, AuditEntry, Invitation, Membership
from accounts.services.api_keys import api_key_create, api_key_revoke, api_key_update
from accounts.services.invitations import (
    invitation_accept,
    invitation_create,
    invitation_from_token,
    invitation_revoke,
)
from accounts.services.members import member_add, member_ensure, member_remove, member_role_set
from accounts.services.organisations import organisation_ensure, organisation_settings_update

pytestmark = pytest.mark.django_db


def _last(action: str) -> AuditEntry:
    return AuditEntry.objects.filter(action=action).latest("created_at", "id")


def _member(user, org) -> Membership:
    return Membership.objects.get(user=user, organisation=org)


def test_creating_an_organisation_from_the_command_line_is_audited_as_the_cli():
    org, created = organisation_ensure(slug="initech", name="Initech")
    entry = _last("organisation.create")
    assert created and entry.organisation == org
    assert (entry.actor, entry.actor_name, entry.source) == (None, "", "cli")


def test_a_bad_slug_is_refused_with_the_field_named():
    with pytest.raises(ValidationError) as error:
        organisation_ensure(slug="not a slug")
    assert "slug" in error.value.message_dict


def test_a_key_created_in_the_console_names_its_creator(people):
    key, raw = api_key_create(
        organisation=people["acme"], actor=Actor.console(people["alice"]), name="ci", rpm=5
    )
    entry = _last("api_key.create")
    assert key.created_by == people["alice"]
    assert (entry.actor, entry.source) == (people["alice"], "console")
    assert entry.details["rpm"] == 5 and raw not in str(entry.details)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"name": "  "}, "name"),
        ({"name": "x", "rpm": 0}, "rpm"),
        ({"name": "x", "concurrency": True}, "concurrency"),
        ({"name": "x", "expires_at": timezone.now() - timedelta(minutes=1)}, "expires_at"),
        ({"name": "x", "allowed_models": ["has space "]}, "allowed_models"),
    ],
)
def test_bad_key_options_are_refused_with_the_field_named(people, options, field):
    with pytest.raises(ValidationError) as error:
        api_key_create(organisation=people["acme"], actor=CLI, **options)
    assert field in error.value.message_dict
    assert not ApiKey.objects.exists()


def test_updating_a_key_records_what_changed_and_nothing_when_nothing_did(people):
    key, _ = api_key_create(organisation=people["acme"], name="ci")
    actor = Actor.api(people["alice"])
    api_key_update(api_key=key, actor=actor, data={"rpm": 60, "name": "ci"})
    api_key_update(api_key=key, actor=actor, data={"rpm": 60})
    entries = AuditEntry.objects.filter(action="api_key.update")
    assert [e.details["changed"] for e in entries] == [["rpm"]]
    assert entries.get().source == "api"
    key.refresh_from_db()
    assert key.rpm == 60


def test_a_key_update_cannot_touch_other_fields(people):
    key, _ = api_key_create(organisation=people["acme"], name="ci")
    with pytest.raises(ValidationError) as error:
        api_key_update(api_key=key, actor=CLI, data={"key_hash": "x"})
    assert "key_hash" in error.value.message_dict


def test_revoking_twice_is_audited_once(people):
    key, _ = api_key_create(organisation=people["acme"], name="ci")
    api_key_revoke(api_key=key, actor=Actor.console(people["bob"]))
    api_key_revoke(api_key=key, actor=Actor.console(people["bob"]))
    assert AuditEntry.objects.filter(action="api_key.revoke", actor=people["bob"]).count() == 1


def test_member_ensure_audits_additions_and_role_changes_only(people):
    acme = people["acme"]
    member_ensure(organisation=acme, email="new@example.com", role="viewer")
    member_ensure(organisation=acme, email="new@example.com", role="viewer")
    member_ensure(organisation=acme, email="new@example.com", role="admin")
    actions = AuditEntry.objects.filter(target="new@example.com").values_list("action", flat=True)
    assert sorted(actions) == ["member.add", "member.role"]


def test_adding_an_existing_user_is_audited_and_unknown_emails_are_refused(people):
    member_add(
        organisation=people["acme"],
        actor=Actor.console(people["alice"]),
        email="charlie@example.com",
        role="viewer",
    )
    assert _member(people["charlie"], people["acme"]).role == "viewer"
    assert _last("member.add").actor == people["alice"]
    with pytest.raises(ValidationError) as error:
        member_add(
            organisation=people["acme"], actor=CLI, email="nobody@example.com", role="viewer"
        )
    assert "Send an invitation instead" in error.value.message_dict["email"][0]


def test_only_an_owner_grants_the_owner_role_but_the_command_line_may(people):
    acme = people["acme"]
    bob = _member(people["bob"], acme)
    with pytest.raises(PermissionDenied):
        member_role_set(member=bob, actor=Actor.console(people["bob"]), role="owner")
    member_role_set(member=bob, actor=CLI, role="owner")
    entry = _last("member.role")
    assert entry.details == {"from": "developer", "to": "owner"} and entry.source == "cli"


def test_the_last_owner_can_be_neither_demoted_nor_removed(people):
    alice = _member(people["alice"], people["acme"])
    with pytest.raises(ValidationError):
        member_role_set(member=alice, actor=CLI, role="admin")
    with pytest.raises(ValidationError):
        member_remove(member=alice, actor=CLI)
    assert Membership.objects.filter(pk=alice.pk, role="owner").exists()


def test_removing_a_member_is_audited(people):
    bob = _member(people["bob"], people["acme"])
    member_remove(member=bob, actor=Actor.console(people["alice"]))
    entry = _last("member.remove")
    assert entry.target == "bob@example.com" and entry.details == {"role": "developer"}


def test_an_invitation_is_created_withdrawn_and_accepted_with_audit_entries(people):
    acme, alice = people["acme"], people["alice"]
    invitation, token = invitation_create(
        organisation=acme, actor=Actor.console(alice), email="Guest@Example.com", role="viewer"
    )
    assert invitation.email == "guest@example.com" and invitation.invited_by == alice
    assert invitation_from_token(token=token) == invitation
    user = invitation_accept(invitation=invitation, password="a-long-pass-phrase-9")
    assert _member(user, acme).role == "viewer"
    assert invitation_from_token(token=token) is None
    assert _last("member.join").actor == user

    second, _ = invitation_create(
        organisation=acme, actor=CLI, email="other@example.com", role="viewer"
    )
    invitation_revoke(invitation=second, actor=CLI)
    assert Invitation.objects.get(pk=second.pk).status == "revoked"
    assert _last("member.invite_revoke").source == "cli"


def test_a_weak_password_is_refused_when_accepting(people):
    invitation, _ = invitation_create(
        organisation=people["acme"], actor=CLI, email="weak@example.com", role="viewer"
    )
    with pytest.raises(ValidationError) as error:
        invitation_accept(invitation=invitation, password="short")
    assert "password" in error.value.message_dict


def test_settings_changes_are_validated_and_audited_with_before_and_after(people):
    acme = people["acme"]
    organisation_settings_update(
        organisation=acme, actor=Actor.api(people["alice"]), data={"default_rpm": 100}
    )
    entry = _last("organisation.settings")
    assert entry.details == {"changed": {"default_rpm": [None, 100]}} and entry.source == "api"
    for bad in ({"store_ttl_hours": 0}, {"retention_policy": "forever"}, {"name": " "}):
        with pytest.raises(ValidationError) as error:
            organisation_settings_update(organisation=acme, actor=CLI, data=bad)
        assert set(error.value.message_dict) == set(bad)
