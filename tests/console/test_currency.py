"""An organisation names the currency of its prices: every budget and cost
the console shows is labelled with it, and it changes through the
organisation's settings like any other, audit entry and all."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from accounts.models import AuditEntry
from tests.console.test_settings import FORM

pytestmark = pytest.mark.django_db


def test_an_organisation_prices_in_us_dollars_unless_told_otherwise(crew):
    assert crew["acme"].currency == "USD"


def test_the_currency_changes_through_the_settings_and_is_audited(as_user, crew):
    client = as_user("erin")
    assert client.post(reverse("console:settings"), {**FORM, "currency": "eur"}).status_code == 302
    acme = crew["acme"]
    acme.refresh_from_db()
    assert acme.currency == "EUR"
    entry = AuditEntry.objects.get(action="organisation.settings")
    assert entry.details["changed"]["currency"] == ["USD", "EUR"]
    assert entry.source == AuditEntry.Source.CONSOLE and entry.actor == crew["erin"]


def test_the_settings_form_left_without_a_currency_keeps_it(as_user, crew):
    assert as_user("erin").post(reverse("console:settings"), FORM).status_code == 302
    crew["acme"].refresh_from_db()
    assert crew["acme"].currency == "USD"


@pytest.mark.parametrize("code", ["EURO", "E1", "€€€", "  "])
def test_a_currency_is_a_three_letter_code(crew, code):
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update

    with pytest.raises(ValidationError) as caught:
        organisation_settings_update(organisation=crew["acme"], actor=CLI, data={"currency": code})
    assert "currency" in caught.value.message_dict


def test_budgets_and_costs_name_the_currency(as_user, crew, estates):
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update

    organisation_settings_update(organisation=crew["acme"], actor=CLI, data={"currency": "CHF"})
    client = as_user("alice")
    pages = {
        "dashboard": client.get(reverse("console:dashboard")),
        "usage": client.get(reverse("console:usage")),
        "keys": client.get(reverse("console:keys")),
        "key form": client.get(reverse("console:key_create")),
        "models": client.get(reverse("console:models")),
        "settings": client.get(reverse("console:settings")),
        "trace": client.get(reverse("console:trace", args=[estates["acme"].row.request_id])),
    }
    for name, response in pages.items():
        assert response.status_code == 200, name
        assert "CHF" in response.content.decode(), name
    assert "Cost<br>(CHF)" in pages["usage"].content.decode()
    assert "Monthly budget (CHF)" in pages["key form"].content.decode()
    assert "Monthly budget (CHF)" in pages["settings"].content.decode()
    # Another organisation's pages keep their own currency.
    assert "CHF" not in as_user("charlie").get(reverse("console:usage")).content.decode()
