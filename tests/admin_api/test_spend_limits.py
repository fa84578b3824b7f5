"""Monthly spend limits through the management API and ``manage.py apply``:
set and cleared on the organisation and on its keys by the console's own
services (audited, with the console's messages), shown with the month's
spend so far, and enforced on the inference API once reached."""

from __future__ import annotations

import io
import os
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command

from accounts.limits import spend_limit_clean
from accounts.models import ApiKey, AuditEntry, Organisation
from tests import inprocess
from tests.admin_api.conftest import ADMIN, error_of
from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db


def this_month() -> str:
    return datetime.now(UTC).strftime("%Y-%m")


def console_message(field: str, value: object) -> str:
    """What the console and the commands say about ``value``."""
    with pytest.raises(ValidationError) as raised:
        spend_limit_clean(field, value)
    return raised.value.message_dict[field][0]


# --- the organisation ------------------------------------------------------------


def test_an_organisation_budget_and_quota_are_set_and_cleared(api, crew):
    answer = api().patch(
        f"{ADMIN}/organisation", {"monthly_budget": "50.00", "monthly_tokens": 1_000_000}, "json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["monthly_budget"] == "50"
    assert answer.json()["monthly_tokens"] == 1_000_000
    acme = Organisation.objects.get(slug="acme")
    assert (acme.monthly_budget, acme.monthly_tokens) == (Decimal(50), 1_000_000)
    entry = AuditEntry.objects.filter(action="organisation.settings").latest("created_at")
    assert entry.source == "api"
    changed = entry.details["changed"]
    assert changed["monthly_tokens"] == [None, 1_000_000]
    assert changed["monthly_budget"][0] is None
    assert Decimal(changed["monthly_budget"][1]) == 50

    cleared = api().patch(f"{ADMIN}/organisation", {"monthly_budget": None}, "json").json()
    assert cleared["monthly_budget"] is None and cleared["monthly_tokens"] == 1_000_000
    assert Organisation.objects.get(slug="acme").monthly_budget is None
    entry = AuditEntry.objects.filter(action="organisation.settings").latest("created_at")
    (before, after) = entry.details["changed"].pop("monthly_budget")
    assert Decimal(before) == 50 and after is None and entry.details["changed"] == {}


def test_setting_a_limit_to_what_it_is_writes_no_audit_entry(api, crew):
    api().patch(f"{ADMIN}/organisation", {"monthly_budget": "12.5"}, "json")
    count = AuditEntry.objects.count()
    again = api().patch(f"{ADMIN}/organisation", {"monthly_budget": 12.50}, "json")
    assert again.json()["monthly_budget"] == "12.5"
    assert AuditEntry.objects.count() == count


def test_the_warning_threshold_is_set_but_never_removed(api, crew):
    answer = api().patch(f"{ADMIN}/organisation", {"budget_warning_percent": 90}, "json")
    assert answer.json()["budget_warning_percent"] == 90
    assert Organisation.objects.get(slug="acme").budget_warning_percent == 90
    for value in (None, 0, 101, "90"):
        refused = api().patch(f"{ADMIN}/organisation", {"budget_warning_percent": value}, "json")
        expected = console_message("budget_warning_percent", value)
        assert error_of(refused)["message"] == f"Invalid 'budget_warning_percent': {expected}"
    assert Organisation.objects.get(slug="acme").budget_warning_percent == 90


def test_the_organisation_shows_the_months_spend(api, estates):
    usage_row(estates["acme"].key.organisation, api_key=estates["acme"].key, cost=Decimal("0.75"))
    spend = api().get(f"{ADMIN}/organisation").json()["spend"]
    # The estate's own row (no cost) and this one.
    assert spend == {"month": this_month(), "cost": "0.75", "tokens": 60}


def test_a_viewer_key_cannot_change_a_limit(api, crew):
    answer = api("acme_viewer").patch(f"{ADMIN}/organisation", {"monthly_tokens": 5}, "json")
    assert answer.status_code == 403
    assert Organisation.objects.get(slug="acme").monthly_tokens is None


# --- keys --------------------------------------------------------------------------


def test_a_key_is_created_with_limits_and_they_are_changed_and_cleared(api, crew):
    limits = {"monthly_budget": "2.25", "monthly_tokens": 1000}
    created = api().post(f"{ADMIN}/keys", {"name": "capped", **limits}, "json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["monthly_budget"], body["monthly_tokens"]) == ("2.25", 1000)
    assert body["spend"] == {"month": this_month(), "cost": "0", "tokens": 0}
    entry = AuditEntry.objects.get(action="api_key.create", details__key_id=body["id"])
    assert Decimal(entry.details["monthly_budget"]) == Decimal("2.25")

    url = f"{ADMIN}/keys/{body['id']}"
    changed = api().patch(url, {"monthly_budget": 40}, "json").json()
    assert changed["monthly_budget"] == "40"
    cleared = api().patch(url, {"monthly_budget": None, "monthly_tokens": None}, "json").json()
    assert cleared["monthly_budget"] is None and cleared["monthly_tokens"] is None
    key = ApiKey.objects.get(pk=body["id"])
    assert (key.monthly_budget, key.monthly_tokens) == (None, None)
    updates = AuditEntry.objects.filter(action="api_key.update", details__key_id=body["id"])
    assert sorted(sorted(e.details["changed"]) for e in updates) == [
        ["monthly_budget"],
        ["monthly_budget", "monthly_tokens"],
    ]


def test_a_key_shows_its_months_spend_alone_and_in_the_list(api, estates):
    key = estates["acme"].key
    usage_row(key.organisation, api_key=key, cost=Decimal("1.5"), output_tokens=70)
    one = api().get(f"{ADMIN}/keys/{key.pk}").json()["spend"]
    # The estate's own row: 10 + 20 tokens, no cost.
    assert one == {"month": this_month(), "cost": "1.5", "tokens": 110}
    listed = {k["id"]: k["spend"] for k in api().get(f"{ADMIN}/keys").json()["data"]}
    assert listed[str(key.pk)] == one


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("monthly_budget", "-3"),
        ("monthly_budget", 0),
        ("monthly_budget", "ten"),
        ("monthly_budget", "1.0000001"),
        ("monthly_budget", "1e12"),
        ("monthly_budget", True),
        ("monthly_budget", ["5"]),
        ("monthly_tokens", 0),
        ("monthly_tokens", -5),
        ("monthly_tokens", "1000"),
        ("monthly_tokens", 1.5),
        ("monthly_tokens", 2**63),
    ],
)
def test_an_invalid_limit_is_refused_with_the_consoles_message(api, estates, field, value):
    expected = console_message(field, value)
    key = estates["acme"].key
    for url in (f"{ADMIN}/organisation", f"{ADMIN}/keys/{key.pk}"):
        answer = api().patch(url, {field: value}, "json")
        assert answer.status_code == 400, answer.content
        error = error_of(answer)
        assert error["param"] == field
        assert error["message"] == f"Invalid '{field}': {expected}"
    created = api().post(f"{ADMIN}/keys", {"name": "x", field: value}, "json")
    assert created.status_code == 400 and error_of(created)["param"] == field
    assert Organisation.objects.get(slug="acme").monthly_budget is None
    assert ApiKey.objects.filter(name="x").count() == 0


def test_another_organisations_key_is_a_404(api, estates):
    globex_key = estates["globex"].key
    answer = api().patch(f"{ADMIN}/keys/{globex_key.pk}", {"monthly_budget": "1"}, "json")
    assert answer.status_code == 404
    assert error_of(answer)["code"] == "not_found"
    assert api().get(f"{ADMIN}/keys/{globex_key.pk}").status_code == 404
    assert ApiKey.objects.get(pk=globex_key.pk).monthly_budget is None


# --- enforcement ---------------------------------------------------------------------


def forget_counters(organisation: Organisation) -> None:
    """Counters of an organisation id that an earlier test database used."""
    if not os.environ.get("REDIS_URL"):
        return
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        for name in client.scan_iter(match=f"sy:spend:organisation:{organisation.id}:*"):
            client.delete(name)
    finally:
        client.close()


def test_a_budget_set_through_the_api_refuses_requests_once_spent(admin_keys, crew):
    import httpx

    simulator = inprocess.simulator()
    forget_counters(crew["acme"])
    with inprocess.serving() as gateway:
        admin = httpx.Client(
            transport=gateway.transport,
            base_url=gateway.url + ADMIN,
            headers={"Authorization": f"Bearer {admin_keys['acme']}"},
        )
        backend = admin.post("/backends", json={"name": "sim", "base_url": simulator.url}).json()
        model = admin.post(
            "/models",
            json={
                "public_id": "sim-model",
                "deployments": [{"backend": backend["id"], "upstream_name": "sim-model"}],
                # Free input, 0.25 per output token: four output tokens cost 1.
                "price_input": 0,
                "price_output": 250_000,
            },
        )
        assert model.status_code == 201, model.text
        key = admin.post("/keys", json={"name": "capped", "monthly_budget": "1"}).json()

        def ask() -> httpx.Response:
            return gateway.http.post(
                "/v1/responses",
                headers={"Authorization": f"Bearer {key['key']}"},
                json={"model": "sim-model", "input": "hi [[tokens:4]]"},
            )

        assert ask().status_code == 200
        refused = ask()
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "insufficient_quota"
        spend = admin.get(f"/keys/{key['id']}").json()["spend"]
        assert spend["cost"] == "1" and spend["tokens"] > 0

        # Raising the budget through the API lets the key through again.
        admin.patch(f"/keys/{key['id']}", json={"monthly_budget": "5"})
        assert ask().status_code == 200
        admin.close()


# --- manage.py apply --------------------------------------------------------------


LIMITED = {
    "organisations": [
        {
            "slug": "initech",
            "settings": {
                "monthly_budget": 500,
                "monthly_tokens": 50_000_000,
                "budget_warning_percent": 90,
            },
            "keys": [
                {"name": "ci", "monthly_budget": 12.5},
                {"name": "batch", "monthly_tokens": 2_000_000},
            ],
        }
    ]
}


def apply(tmp_path, document: dict) -> list[str]:
    path = tmp_path / "switchyard.yaml"
    path.write_text(yaml.safe_dump(document))
    out = io.StringIO()
    call_command("apply", "-f", str(path), stdout=out)
    return out.getvalue().splitlines()


def test_apply_sets_spend_limits_and_a_second_run_changes_nothing(tmp_path):
    apply(tmp_path, LIMITED)
    initech = Organisation.objects.get(slug="initech")
    assert (initech.monthly_budget, initech.monthly_tokens) == (Decimal(500), 50_000_000)
    assert initech.budget_warning_percent == 90
    ci = ApiKey.objects.get(name="ci")
    assert (ci.monthly_budget, ci.monthly_tokens) == (Decimal("12.5"), None)
    assert ApiKey.objects.get(name="batch").monthly_tokens == 2_000_000
    entries = AuditEntry.objects.count()

    lines = apply(tmp_path, LIMITED)
    assert lines[-1] == "0 create, 0 update, 3 unchanged, 0 delete."
    assert AuditEntry.objects.count() == entries


def test_apply_changes_and_clears_spend_limits(tmp_path):
    apply(tmp_path, LIMITED)
    changed = yaml.safe_load(yaml.safe_dump(LIMITED))
    org = changed["organisations"][0]
    org["settings"]["monthly_budget"] = None
    org["keys"][0]["monthly_budget"] = "12.50"  # the same amount, written otherwise
    org["keys"][1]["monthly_tokens"] = 3_000_000
    lines = apply(tmp_path, changed)
    assert "update    organisation initech (monthly_budget)" in lines
    assert "unchanged key initech/ci" in lines
    assert "update    key initech/batch (monthly_tokens)" in lines
    assert Organisation.objects.get(slug="initech").monthly_budget is None
    assert ApiKey.objects.get(name="batch").monthly_tokens == 3_000_000


def test_apply_refuses_an_invalid_limit_with_the_consoles_message(tmp_path):
    from django.core.management.base import CommandError

    broken = yaml.safe_load(yaml.safe_dump(LIMITED))
    broken["organisations"][0]["keys"][0]["monthly_budget"] = -1
    with pytest.raises(CommandError) as raised:
        apply(tmp_path, broken)
    expected = console_message("monthly_budget", -1)
    assert f"organisations[0].keys[0].monthly_budget: {expected}" in str(raised.value)
    assert not Organisation.objects.filter(slug="initech").exists()
