from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from accounts.keys import hash_key
from accounts.models import ApiKey
from accounts.services.api_keys import api_key_create, api_key_revoke
from responses_api.access.auth import authenticate
from responses_api.protocol.errors import ApiError

authenticate_sync = async_to_sync(authenticate)


def test_only_the_hash_of_a_key_is_stored(people):
    key, raw = api_key_create(organisation=people["acme"], name="ci")
    stored = ApiKey.objects.get(pk=key.pk)
    assert raw.startswith("sy_sk_") and len(raw) > 40
    assert stored.key_hash == hash_key(raw)
    assert all(raw not in str(getattr(stored, f.attname)) for f in ApiKey._meta.fields)
    assert stored.prefix == raw[:14]


def test_a_valid_key_authenticates_to_its_organisation(people):
    _, raw = api_key_create(organisation=people["acme"], name="ci")
    caller = authenticate_sync(raw)
    assert caller.organisation_slug == "acme"


@pytest.mark.parametrize("raw", [None, "", "sy_sk_", "sk-not-ours", "sy_sk_" + "x" * 43])
def test_missing_malformed_or_unknown_keys_are_rejected_alike(people, raw):
    with pytest.raises(ApiError) as error:
        authenticate_sync(raw)
    assert error.value.status == 401
    assert error.value.code == "invalid_api_key"


def test_revoked_key_is_rejected(people):
    key, raw = api_key_create(organisation=people["acme"], name="ci")
    authenticate_sync(raw)  # cached now
    api_key_revoke(api_key=key)
    with pytest.raises(ApiError) as error:
        authenticate_sync(raw)
    assert error.value.status == 401


def test_expired_key_is_rejected(people):
    key, raw = api_key_create(
        organisation=people["acme"], name="ci", expires_at=timezone.now() + timedelta(seconds=60)
    )
    # Time passes: the key expires (creating it already expired is refused).
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ApiError) as error:
        authenticate_sync(raw)
    assert error.value.status == 401


def test_key_expiring_later_still_works(people):
    _, raw = api_key_create(
        organisation=people["acme"], name="ci", expires_at=timezone.now() + timedelta(days=1)
    )
    assert authenticate_sync(raw).organisation_slug == "acme"


def test_an_admin_key_names_every_bad_field_at_once(people):
    from django.core.exceptions import ValidationError

    from accounts.admin_keys import admin_key_create

    with pytest.raises(ValidationError) as error:
        admin_key_create(
            organisation=people["acme"],
            name=" ",
            role="owner",
            expires_at=timezone.now() - timedelta(seconds=1),
        )
    assert error.value.message_dict == {
        "name": ["Give the key a name."],
        "role": ["Pick one of: admin, viewer."],
        "expires_at": ["The expiry must be in the future."],
    }


def test_both_kinds_of_key_are_revoked_once_and_audited_once(people):
    from accounts.admin_keys import admin_key_create, admin_key_revoke
    from accounts.models import AuditEntry

    key, _ = api_key_create(organisation=people["acme"], name="ci")
    admin_key, _ = admin_key_create(organisation=people["acme"], name="ops")
    for _ in range(2):
        api_key_revoke(api_key=key)
        admin_key_revoke(admin_key=admin_key)
    assert key.status == admin_key.status == "revoked"
    revocations = AuditEntry.objects.filter(action__endswith=".revoke").order_by("id")
    assert [(e.action, e.target, e.details) for e in revocations] == [
        ("api_key.revoke", f"ci ({key.prefix}…)", {"key_id": str(key.id)}),
        ("admin_key.revoke", f"ops ({admin_key.prefix}…)", {"admin_key_id": str(admin_key.id)}),
    ]
