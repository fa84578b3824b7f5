"""Monthly spend in the console: set on keys (create, edit) and on the
organisation (settings), and shown against the limits, with a badge near
and at a limit, on the keys page and the dashboard."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiKey, AuditEntry
from responses_api.usage.monthly import month_spent, month_spent_by_key, month_start
from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def spent(estates, crew):
    """Acme's key spent 8.50 and 300 tokens this month (and more last month)."""
    acme, key = crew["acme"], estates["acme"].key
    now = timezone.now()
    for cost in ("5.00", "3.50"):
        usage_row(
            acme,
            api_key=key,
            cost=Decimal(cost),
            input_tokens=100,
            output_tokens=50,
            created_at=now,
        )
    usage_row(acme, api_key=key, cost=Decimal(100), created_at=month_start(now) - timedelta(days=1))
    return key


def test_month_spent_sums_this_month_per_key_and_organisation(spent, estates, crew):
    acme = crew["acme"]
    # estates' own row: 10 + 20 tokens, no cost, maybe in this month.
    own = estates["acme"].row
    own_tokens = 30 if own.created_at >= month_start(timezone.now()) else 0
    assert month_spent(acme.pk, str(spent.pk)) == (Decimal("8.50"), 300 + own_tokens)
    assert month_spent(acme.pk) == (Decimal("8.50"), 300 + own_tokens)
    assert month_spent_by_key(acme.pk) == {str(spent.pk): (Decimal("8.50"), 300 + own_tokens)}
    # Globex's one row (estates) cost nothing and is not Acme's.
    assert month_spent(crew["globex"].pk) == (Decimal(0), own_tokens)


def test_the_keys_page_shows_the_spend_and_a_badge_near_the_budget(as_user, spent):
    ApiKey.objects.filter(pk=spent.pk).update(monthly_budget=Decimal(10))
    page = as_user("dave").get(reverse("console:keys")).content.decode()
    cell = page[page.index(f'id="spend-{spent.id}"') :]
    cell = cell[: cell.index("</td>")]
    assert "8.50 of 10.00" in cell and "near limit" in cell
    ApiKey.objects.filter(pk=spent.pk).update(monthly_budget=Decimal("8.5"))
    page = as_user("dave").get(reverse("console:keys")).content.decode()
    assert "8.50 of 8.50" in page and "limit reached" in page
    ApiKey.objects.filter(pk=spent.pk).update(monthly_budget=Decimal(20))
    page = as_user("dave").get(reverse("console:keys")).content.decode()
    assert "8.50 of 20.00" in page and "near limit" not in page


def test_the_dashboard_shows_the_organisations_month_against_its_limits(as_user, spent, crew):
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update

    organisation_settings_update(
        organisation=crew["acme"], actor=CLI, data={"monthly_budget": Decimal(10)}
    )
    page = as_user("bob").get(reverse("console:dashboard")).content.decode()
    card = page[page.index('id="month-spend"') :][:600]
    assert "8.50" in card and "of 10.00" in card and "near limit" in card
    # Globex spent nothing of Acme's.
    other = as_user("charlie").get(reverse("console:dashboard")).content.decode()
    card = other[other.index('id="month-spend"') :][:600]
    assert "0.00" in card and "8.50" not in card


def test_an_admin_edits_a_keys_monthly_limits_and_it_is_audited(as_user, estates):
    key = estates["acme"].key
    url = reverse("console:key_edit", args=[key.id])
    client = as_user("erin")
    form = client.get(url).context["form"]
    data = {
        name: value
        for name, value in form.initial.items()
        if value is not None and name != "allowed_models"
    }
    response = client.post(url, {**data, "monthly_budget": "12.5", "monthly_tokens": "40000"})
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.monthly_budget == Decimal("12.5") and key.monthly_tokens == 40000
    entry = AuditEntry.objects.get(action="api_key.update")
    assert set(entry.details["changed"]) == {"monthly_budget", "monthly_tokens"}
    assert entry.details["monthly_budget"] == "12.5"
    # Removing the budget: the field left empty.
    client.post(url, {**data, "monthly_budget": "", "monthly_tokens": "40000"})
    key.refresh_from_db()
    assert key.monthly_budget is None and key.monthly_tokens == 40000


def test_only_admins_edit_keys_and_never_another_organisations(as_user, estates):
    url = reverse("console:key_edit", args=[estates["acme"].key.id])
    assert as_user("bob").get(url).status_code == 403  # a developer, even of their own key
    assert as_user("charlie").get(url).status_code == 404
    assert as_user("bob").post(url, {"name": "x", "monthly_budget": "999"}).status_code == 403
    assert ApiKey.objects.get(pk=estates["acme"].key.pk).monthly_budget is None


def test_a_key_is_created_with_monthly_limits(as_user, estates):
    response = as_user("bob").post(
        reverse("console:key_create"),
        {"name": "capped", "monthly_budget": "2.25", "monthly_tokens": "1000"},
    )
    assert response.status_code == 200
    key = ApiKey.objects.get(name="capped")
    assert (key.monthly_budget, key.monthly_tokens) == (Decimal("2.25"), 1000)
    bad = as_user("bob").post(reverse("console:key_create"), {"name": "bad", "monthly_budget": "0"})
    assert bad.context["form"].errors["monthly_budget"]


def test_settings_set_the_organisations_monthly_limits(as_user, crew):
    client = as_user("erin")
    form = {
        "name": "Acme",
        "retention_policy": "none",
        "store_ttl_hours": "720",
        "usage_retention_days": "90",
        "monthly_budget": "250",
        "monthly_tokens": "5000000",
        "budget_warning_percent": "90",
    }
    assert client.post(reverse("console:settings"), form).status_code == 302
    acme = crew["acme"]
    acme.refresh_from_db()
    assert (acme.monthly_budget, acme.monthly_tokens, acme.budget_warning_percent) == (
        Decimal(250),
        5_000_000,
        90,
    )
    changed = AuditEntry.objects.get(action="organisation.settings").details["changed"]
    assert changed["monthly_budget"] == [None, "250"]
    refused = client.post(reverse("console:settings"), {**form, "budget_warning_percent": "101"})
    assert refused.status_code == 200 and refused.context["form"].errors
    page = client.get(reverse("console:settings")).content.decode()
    assert 'id="month-spend"' in page and "of 250.00" in page
