"""``create_org`` and ``create_api_key`` set monthly spend limits with
``--monthly-budget AMOUNT --monthly-tokens N``; through the services, audited."""

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.keys import hash_key
from accounts.models import ApiKey, AuditEntry, Organisation

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_org_sets_the_limits_and_updates_them_idempotently():
    out = run("create_org", "acme", "--monthly-budget", "25.50", "--monthly-tokens", "1000000")
    assert "monthly budget: 25.5; monthly tokens: 1000000" in out
    org = Organisation.objects.get(slug="acme")
    assert org.monthly_budget == Decimal("25.50") and org.monthly_tokens == 1_000_000
    entries = AuditEntry.objects.filter(organisation=org, action="organisation.settings")
    assert entries.get().details["changed"] == {
        "monthly_budget": [None, "25.50"],
        "monthly_tokens": [None, 1_000_000],
    }
    # The same command again changes and records nothing.
    run("create_org", "acme", "--monthly-budget", "25.5", "--monthly-tokens", "1000000")
    assert entries.count() == 1
    # Another budget; the quota, not given, stays; "none" removes a limit.
    run("create_org", "acme", "--monthly-budget", "40")
    org.refresh_from_db()
    assert org.monthly_budget == Decimal(40) and org.monthly_tokens == 1_000_000
    run("create_org", "acme", "--monthly-tokens", "none")
    org.refresh_from_db()
    assert org.monthly_tokens is None and org.monthly_budget == Decimal(40)
    assert entries.count() == 3


def test_create_api_key_takes_a_budget_and_a_token_quota():
    run("create_org", "acme")
    raw = run(
        "create_api_key",
        "--org",
        "acme",
        "--name",
        "ci",
        "--monthly-budget",
        "3.125",
        "--monthly-tokens",
        "5000",
    ).splitlines()[-1]
    key = ApiKey.objects.get(key_hash=hash_key(raw))
    assert key.monthly_budget == Decimal("3.125") and key.monthly_tokens == 5000
    details = AuditEntry.objects.get(action="api_key.create").details
    assert details["monthly_budget"] == "3.125" and details["monthly_tokens"] == 5000
    plain = run("create_api_key", "--org", "acme", "--name", "plain").splitlines()[-1]
    key = ApiKey.objects.get(key_hash=hash_key(plain))
    assert key.monthly_budget is None and key.monthly_tokens is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--monthly-budget", "0"), "monthly_budget: An amount above 0"),
        (("--monthly-budget", "-3"), "monthly_budget: An amount above 0"),
        (("--monthly-budget", "ten"), "monthly_budget: An amount"),
        (("--monthly-budget", "1.0000001"), "At most 6 digits after the point"),
        (("--monthly-tokens", "0"), "monthly_tokens: A whole number from 1"),
    ],
)
def test_bad_limits_are_refused_naming_the_field(args, message):
    run("create_org", "acme")
    with pytest.raises(CommandError, match=message):
        run("create_api_key", "--org", "acme", "--name", "ci", *args)
    with pytest.raises(CommandError, match=message):
        run("create_org", "acme", *args)
    assert not ApiKey.objects.exists()
    assert Organisation.objects.get().monthly_budget is None


def test_a_token_quota_must_be_a_whole_number():
    with pytest.raises(CommandError, match="monthly-tokens"):
        run("create_org", "acme", "--monthly-tokens", "1.5")
