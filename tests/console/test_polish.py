"""What an operator reads on the console: amounts as amounts, moments as
moments, audit details as sentences, a usage log that fits, and a Codex
page that starts from a model that answers."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db

STYLESHEET = Path(settings.BASE_DIR) / "console" / "static" / "console" / "console.css"


def _deployed(org, name: str, health: str):
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure
    from responses_api.models import Backend

    backend, _ = backend_ensure(
        organisation=org, name=f"{name}-gpu", base_url="http://127.0.0.1:9/v1", api_key="x"
    )
    Backend.objects.filter(pk=backend.pk).update(health=health)
    model, _ = model_ensure(organisation=org, public_id=name, backend=backend)
    return model


# --- Use with Codex ----------------------------------------------------------


def test_codex_profile_defaults_to_a_model_whose_backend_is_online(estates, as_user, crew):
    _deployed(crew["acme"], "aaa-down", "offline")
    _deployed(crew["acme"], "bbb-up", "online")
    url = reverse("console:key_codex", args=[estates["acme"].key.id])
    response = as_user("alice").get(url)
    assert response.context["model"].public_id == "bbb-up"
    assert '<option value="bbb-up" selected>' in response.content.decode()


def test_codex_profile_passes_over_an_offline_backend_for_one_not_known_down(
    estates, as_user, crew
):
    _deployed(crew["acme"], "aaa-down", "offline")
    url = reverse("console:key_codex", args=[estates["acme"].key.id])
    # acme-model's backend has never been checked: better than a dead one.
    assert as_user("alice").get(url).context["model"].public_id == "acme-model"


def test_codex_profile_still_takes_a_chosen_model(estates, as_user, crew):
    _deployed(crew["acme"], "aaa-down", "offline")
    url = reverse("console:key_codex", args=[estates["acme"].key.id])
    response = as_user("alice").get(url, {"model": "aaa-down"})
    assert response.context["model"].public_id == "aaa-down"


def test_codex_files_wrap_inside_their_box():
    css = STYLESHEET.read_text()
    rule = re.search(r"^pre \{([^}]*)\}", css, re.MULTILINE)
    assert rule is not None
    assert "white-space: pre-wrap" in rule.group(1) and "overflow" in rule.group(1)


# --- Amounts -----------------------------------------------------------------


def test_a_trace_shows_a_zero_cost_as_money(as_user, crew):
    row = usage_row(crew["acme"], cost=Decimal(0))
    body = as_user("alice").get(reverse("console:trace", args=[row.request_id])).content.decode()
    assert "0E-8" not in body
    assert '<dd id="trace-cost">0.00 USD</dd>' in body


def test_a_trace_keeps_every_digit_of_a_small_cost(as_user, crew):
    row = usage_row(crew["acme"], cost=Decimal("0.00012345"))
    body = as_user("alice").get(reverse("console:trace", args=[row.request_id])).content.decode()
    assert '<dd id="trace-cost">0.00012345 USD</dd>' in body


def test_a_keys_budget_reads_as_typed_in_its_form(estates, as_user, crew):
    from accounts.services.api_keys import api_key_create

    key, _ = api_key_create(
        organisation=crew["acme"], name="budgeted", monthly_budget=Decimal("50")
    )
    body = as_user("alice").get(reverse("console:key_edit", args=[key.id])).content.decode()
    assert 'name="monthly_budget" value="50.00"' in body
    assert "50.000000" not in body
    listing = as_user("alice").get(reverse("console:keys")).content.decode()
    assert "of 50.00" in listing and "50.000000" not in listing


def test_an_unchanged_budget_is_not_saved_again(estates, as_user, crew):
    from accounts.models import AuditEntry
    from accounts.services.api_keys import api_key_create

    key, _ = api_key_create(
        organisation=crew["acme"], name="budgeted", monthly_budget=Decimal("50")
    )
    response = as_user("alice").post(
        reverse("console:key_edit", args=[key.id]),
        {"name": "budgeted", "monthly_budget": "50.00"},
    )
    assert response.status_code == 302
    assert not AuditEntry.objects.filter(action="api_key.update").exists()


def test_the_organisations_budget_reads_as_typed(as_user, crew):
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update

    organisation_settings_update(
        organisation=crew["acme"], actor=CLI, data={"monthly_budget": Decimal("50")}
    )
    body = as_user("alice").get(reverse("console:settings")).content.decode()
    assert 'value="50.00"' in body
    assert "50.000000" not in body


def test_model_prices_read_as_amounts(estates, as_user):
    from accounts.audit import CLI
    from responses_api.catalogue.services.served_models import model_update

    model = estates["acme"].model
    model_update(model=model, actor=CLI, data={"price_input": Decimal("0.15")})
    listing = as_user("alice").get(reverse("console:models")).content.decode()
    assert "0.15 · 0.00 · 0.00" in listing
    form = as_user("alice").get(reverse("console:model_edit", args=[model.id])).content.decode()
    assert 'value="0.15"' in form and "0.150000" not in form


# --- Audit log ---------------------------------------------------------------


def test_audit_details_read_as_before_and_after(as_user, crew):
    from accounts.audit import CLI
    from accounts.services.organisations import organisation_ensure, organisation_settings_update

    organisation_ensure(slug="acme", name="Acme Corp")
    organisation_settings_update(
        organisation=crew["acme"], actor=CLI, data={"monthly_budget": Decimal("50")}
    )
    body = as_user("alice").get(reverse("console:audit")).content.decode()
    assert '<span class="muted">name:</span> Acme → Acme Corp' in body
    assert '<span class="muted">monthly_budget:</span> – → 50.00' in body
    assert "{" not in body.split("<tbody>")[1] and "[&#x27;" not in body


def test_audit_names_the_fields_a_change_touched(estates, as_user):
    from accounts.audit import CLI
    from accounts.services.api_keys import api_key_update

    api_key_update(api_key=estates["acme"].key, actor=CLI, data={"name": "renamed", "rpm": 5})
    body = as_user("alice").get(reverse("console:audit")).content.decode()
    assert '<span class="muted">changed:</span> name, rpm' in body


def test_a_role_change_reads_as_one_arrow():
    from console.templatetags.console import audit_lines

    assert audit_lines({"from": "developer", "to": "admin"}) == [("", "developer → admin")]
    assert audit_lines({"ok": True, "latency_ms": None}) == [("ok", "yes"), ("latency_ms", "–")]


def test_a_connection_tests_latency_reads_in_whole_milliseconds(estates, as_user):
    from accounts.audit import AuditEntry

    AuditEntry.objects.create(
        organisation=estates["acme"].key.organisation,
        action="backend.test",
        target="sim",
        source=AuditEntry.Source.CONSOLE,
        details={"ok": True, "latency_ms": 2.2394959996745456},
    )
    body = as_user("alice").get(reverse("console:audit")).content.decode()
    assert '<span class="muted">latency_ms:</span> 2 ms' in body
    assert "2.239" not in body


# --- Usage log ---------------------------------------------------------------


def _ids(response) -> set[str]:
    return {str(row.request_id) for row in response.context["page"]}


@pytest.fixture
def lookalikes(crew):
    """Two of Acme's requests and one of Globex's sharing their first digits."""
    ids = {
        "acme1": "0badc0de-0000-4000-8000-000000000001",
        "acme2": "0badc0de-0000-4000-8000-000000000002",
        "globex": "0badc0de-1111-4000-8000-000000000003",
    }
    usage_row(crew["acme"], request_id=uuid.UUID(ids["acme1"]), cost=Decimal("0.0125"))
    usage_row(crew["acme"], request_id=uuid.UUID(ids["acme2"]))
    usage_row(crew["globex"], request_id=uuid.UUID(ids["globex"]))
    return ids


def test_usage_search_takes_a_prefix_of_eight_characters(as_user, lookalikes):
    response = as_user("bob").get(reverse("console:usage"), {"request_id": "0BADC0DE"})
    assert _ids(response) == {lookalikes["acme1"], lookalikes["acme2"]}


def test_usage_search_prefix_may_run_past_a_dash(as_user, lookalikes):
    response = as_user("bob").get(reverse("console:usage"), {"request_id": "0badc0de-0000-4000-8"})
    assert _ids(response) == {lookalikes["acme1"], lookalikes["acme2"]}


def test_usage_search_prefix_stays_in_the_organisation(as_user, lookalikes):
    response = as_user("charlie").get(reverse("console:usage"), {"request_id": "0badc0de"})
    assert _ids(response) == {lookalikes["globex"]}
    response = as_user("bob").get(reverse("console:usage"), {"request_id": "0badc0de-1111"})
    assert _ids(response) == set()


def test_usage_search_full_id_finds_exactly_that_request(as_user, lookalikes):
    response = as_user("bob").get(reverse("console:usage"), {"request_id": lookalikes["acme1"]})
    assert _ids(response) == {lookalikes["acme1"]}


@pytest.mark.parametrize("typed", ["0badc0d", "0badc0dz", "not an id at all"])
def test_usage_search_refuses_a_short_or_foreign_prefix(as_user, lookalikes, typed):
    response = as_user("bob").get(reverse("console:usage"), {"request_id": typed})
    assert _ids(response) == set()
    assert response.context["form"].errors["request_id"]


def test_the_search_box_sends_a_prefix_to_the_usage_log(as_user, lookalikes):
    response = as_user("bob").get(reverse("console:trace_search"), {"q": " 0badc0de "})
    assert response.status_code == 302
    assert response.url == reverse("console:usage") + "?request_id=0badc0de"


def test_the_search_box_still_refuses_what_is_no_id(as_user, lookalikes):
    response = as_user("bob").get(reverse("console:trace_search"), {"q": "0badc0d"})
    assert response.status_code == 404
    assert "is not a request id" in response.content.decode()


def test_usage_log_shows_each_requests_cost(as_user, lookalikes):
    body = as_user("bob").get(reverse("console:usage")).content.decode()
    assert '<th class="num">Cost<br>(USD)</th>' in body
    assert '<td class="num">0.0125</td>' in body
    assert "0E-8" not in body


def test_usage_log_cuts_long_ids_short_with_the_whole_id_in_a_title(as_user, lookalikes):
    body = as_user("bob").get(reverse("console:usage")).content.decode()
    assert f'class="mono cut" href="/console/trace/{lookalikes["acme1"]}/"' in body
    assert f'title="{lookalikes["acme1"]}"' in body


def test_usage_log_cells_may_wrap():
    css = STYLESHEET.read_text()
    assert "table.usage td { white-space: nowrap; }" not in css
    assert "table.usage .cut" in css


# --- Trace times -------------------------------------------------------------


def test_trace_times_read_like_the_rest_of_the_console(as_user, crew):
    received = datetime(2026, 12, 3, 8, 26, 47, 123456, tzinfo=UTC)
    row = usage_row(crew["acme"], created_at=received)
    row.finished_at = datetime(2026, 12, 3, 8, 26, 49, tzinfo=UTC)
    row.save(update_fields=["finished_at"])
    body = as_user("alice").get(reverse("console:trace", args=[row.request_id])).content.decode()
    assert (
        '<time id="trace-received" datetime="2026-12-03T08:26:47.123456+00:00">'
        "2026-12-03 08:26:47 UTC</time>"
    ) in body
    assert (
        '<time id="trace-finished" datetime="2026-12-03T08:26:49+00:00">2026-12-03 08:26:49 UTC'
    ) in body
    assert "2026-12-03T08:26:47.123456+00:00</dd>" not in body


def test_a_trace_without_an_end_says_so(as_user, crew):
    row = usage_row(crew["acme"])
    body = as_user("alice").get(reverse("console:trace", args=[row.request_id])).content.decode()
    assert "<dt>Finished</dt><dd>–</dd>" in body


# --- Dark mode ---------------------------------------------------------------


def test_the_console_offers_a_dark_palette(as_user, crew):
    body = as_user("alice").get(reverse("console:dashboard")).content.decode()
    assert '<meta name="color-scheme" content="light dark">' in body
    css = STYLESHEET.read_text()
    dark = css.split("@media (prefers-color-scheme: dark)", 1)[1]
    for name in ("--bg", "--panel", "--ink", "--ok-soft", "--bad-soft", "--s1", "--chart-grid"):
        assert f"{name}:" in dark.split("}\n}", 1)[0]


def test_colours_outside_the_palette_are_only_the_sidebars():
    """Every colour a page draws with comes from a custom property, so the
    dark palette reaches it; the sidebar and secret boxes are dark in both."""
    css = STYLESHEET.read_text()
    body = css.split("@media (prefers-color-scheme: dark)", 1)[1].split("}\n}", 1)[1]
    stray = [
        line
        for line in body.splitlines()
        if re.search(r"#[0-9a-fA-F]{3,6}\b", line)
        and not re.match(
            r"\.(sidebar|org-switch|whoami|brand|linklike|secret)|\.sidebar", line.strip()
        )
    ]
    assert stray == []
