""" "Test for Codex" on the model page: an owner or admin starts the
readiness check, everyone in the organisation sees its latest results, and
nobody else can start one."""

from __future__ import annotations

import pytest
from django.urls import reverse

from responses_api.catalogue import catalog
from responses_api.models import ModelCheck
from tests.support import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    catalog.forget()
    yield
    catalog.forget()


def test_an_admin_starts_the_check_and_every_member_sees_the_results(provision, simulator, as_user):
    tenant = provision("acme", simulator.url)
    page = reverse("console:model_edit", args=[tenant.model.id])
    assert "Not checked yet" in as_user("dave").get(page).content.decode()

    response = as_user("erin").post(reverse("console:model_check", args=[tenant.model.id]))
    assert response.status_code == 302
    check = wait_until(
        lambda: ModelCheck.objects.filter(model=tenant.model).first(),
        timeout=90,
        interval=0.5,
        message="no check was recorded",
    )
    shown = as_user("dave").get(page).content.decode()  # a viewer sees the results
    assert "Ready for Codex?" in shown and "custom_tool" in shown
    assert ("passed" if check.passed else "failed") in shown


def test_a_viewer_cannot_start_a_check(provision, simulator, as_user):
    tenant = provision("acme", simulator.url)
    response = as_user("dave").post(reverse("console:model_check", args=[tenant.model.id]))
    assert response.status_code in (403, 404)
    assert not ModelCheck.objects.exists()


def test_another_organisations_model_cannot_be_checked(provision, simulator, as_user):
    theirs = provision("globex", simulator.url)
    response = as_user("alice").post(reverse("console:model_check", args=[theirs.model.id]))
    assert response.status_code == 404
    assert not ModelCheck.objects.exists()
