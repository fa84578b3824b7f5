"""``manage.py model_check`` against the simulator, through the API's own
ASGI application: every capability passes, and a simulator broken for one
capability fails that one, clearly, and no other."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command

from accounts.models import ApiKey
from responses_api.catalogue import catalog
from responses_api.checks.capabilities import NAMES
from responses_api.checks.model_check import run_check
from responses_api.models import ModelCheck, UsageLog
from tests.conftest import Proc, start_simulator, wait_for

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WINDOW = 512


@pytest.fixture(scope="module")
def sim_windowed() -> Iterator[Proc]:
    proc = start_simulator("--context-window", str(WINDOW))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def sim_broken() -> Iterator[Proc]:
    proc = start_simulator("--context-window", str(WINDOW), "--break", "freeform")
    yield proc
    proc.stop()


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    catalog.forget()
    yield
    catalog.forget()


def _tenant(provision, proc: Proc):
    tenant = provision("acme", proc.url)
    tenant.model.context_window = WINDOW
    tenant.model.save(update_fields=["context_window"])
    return tenant


def test_every_capability_passes_against_the_simulator(provision, sim_windowed):
    tenant = _tenant(provision, sim_windowed)
    check = run_check("acme", "sim-model", "sim", timeout=20)
    failed = [r for r in check.results if not r["passed"]]
    assert failed == []
    assert [r["name"] for r in check.results] == list(NAMES)
    assert not any(r["skipped"] for r in check.results)
    # The simulator's own counter proves the abort (read over HTTP).
    (cancellation,) = [r for r in check.results if r["name"] == "cancellation"]
    assert cancellation["detail"] == "the backend saw the disconnect"
    assert check.passed and check.backend == tenant.backend
    assert ModelCheck.objects.get() == check
    # Its own key, revoked after; every row it left is marked as a check.
    key = ApiKey.objects.get(name="model check")
    assert key.revoked_at is not None

    # Rows are written after their answers: wait for the last ending's.
    def rows_of_every_ending():
        rows = list(UsageLog.objects.filter(api_key=key))
        return rows if {r.status for r in rows} >= {200, 400, 499} else None

    rows = wait_for(rows_of_every_ending, timeout=30)
    assert all(r.is_check for r in rows)
    assert sorted({r.status for r in rows}) == [200, 400, 499]
    # The organisation's own key's rows are not checks.
    assert not UsageLog.objects.filter(is_check=False, api_key=key).exists()


def test_a_freeform_input_wrapped_in_json_fails_that_capability_only(provision, sim_broken):
    _tenant(provision, sim_broken)
    check = run_check("acme", "sim-model", timeout=20)
    verdicts = {r["name"]: r for r in check.results}
    assert not check.passed
    custom = verdicts.pop("custom_tool")
    assert not custom["passed"]
    assert "JSON-wrapped" in custom["detail"]
    assert "custom_tool_call" in custom["raw"]  # the response as it came back
    assert all(r["passed"] for r in verdicts.values()), verdicts


def test_the_command_prints_json_and_fails_for_a_failing_model(provision, sim_broken, capsys):
    _tenant(provision, sim_broken)
    with pytest.raises(CommandError, match="failed the check"):
        call_command("model_check", "sim-model", "--org", "acme", "--json", "--timeout", "20")
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "sim-model" and report["passed"] is False
    assert [r["name"] for r in report["results"] if not r["passed"]] == ["custom_tool"]


def test_an_unknown_backend_is_refused(provision, sim_windowed):
    _tenant(provision, sim_windowed)
    with pytest.raises(CommandError, match="not deployed on a backend 'nope'"):
        call_command("model_check", "sim-model", "--org", "acme", "--backend", "nope")


def test_the_embedded_defaults_model_passes_its_context_window_check(provision, simulator):
    """The simulator as ``run_embedded`` starts it (no options) and the model
    as it provisions it: the backend refuses what the model cannot take."""
    from responses_api.simulator.plan import CONTEXT_WINDOW

    tenant = provision("acme", simulator.url)
    tenant.model.context_window = CONTEXT_WINDOW
    tenant.model.save(update_fields=["context_window"])
    check = run_check("acme", "sim-model", "sim", timeout=60, only=("context_window",))
    (result,) = check.results
    assert result["passed"], result["detail"]
    assert result["detail"] == f"near {CONTEXT_WINDOW} accepted, past it context_length_exceeded"


def test_a_checks_traffic_is_in_no_figure_of_the_organisation(provision, sim_windowed, people):
    from accounts.audit import Actor
    from accounts.models import AuditEntry
    from responses_api.models import UsageDaily, UsageHourly
    from responses_api.usage.monthly import month_spent

    tenant = _tenant(provision, sim_windowed)
    tenant.model.price_input = tenant.model.price_output = 1
    tenant.model.save(update_fields=["price_input", "price_output"])
    catalog.forget()
    alice = people["alice"]
    run_check(
        "acme",
        "sim-model",
        "sim",
        timeout=20,
        only=("text", "tool_call"),
        actor=Actor.console(alice),
    )
    key = ApiKey.objects.get(name="model check")
    assert key.is_check
    rows = list(UsageLog.objects.filter(api_key=key))
    assert rows and all(r.is_check for r in rows)
    assert any(r.cost > 0 for r in rows)
    # Not in the dashboard's roll-ups, nor in the month's spend.
    assert not UsageHourly.objects.filter(api_key_id=key.id).exists()
    assert not UsageDaily.objects.filter(api_key_id=key.id).exists()
    assert month_spent(tenant.organisation.id) == (0, 0)
    # The console person who started it is who the audit names.
    entries = AuditEntry.objects.filter(action__in=["api_key.create", "api_key.revoke"])
    entries = [e for e in entries if "model check" in e.target]
    assert len(entries) == 2
    assert all(e.actor == alice and e.source == AuditEntry.Source.CONSOLE for e in entries)


def test_a_checks_key_is_not_among_the_organisations_keys(provision, sim_windowed, people):
    from django.test import Client
    from django.urls import reverse

    _tenant(provision, sim_windowed)
    run_check("acme", "sim-model", "sim", timeout=20, only=("text",))
    client = Client()
    client.force_login(people["alice"])
    body = client.get(reverse("console:keys")).content.decode()
    assert "acme key" in body and "model check" not in body
    usage = client.get(reverse("console:usage")).content.decode()
    assert 'title="A model check' in usage
