"""Dead letters have a page of their own, for platform support staff only."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from responses_api.usage.deadletters import Refusal, deadletters_add

pytestmark = pytest.mark.django_db

URL = reverse("console:support_deadletters")


@pytest.fixture
def letters(crew):
    rows = [
        {
            "request_id": str(uuid.uuid4()),
            "organisation_id": crew[slug].id,
            "method": "POST",
            "endpoint": "/responses/compact",
            "status": 200,
            "model": f"{slug}-model",
            "user_agent": "secret-agent/1.0",
        }
        for slug in ("acme", "globex")
    ]
    refused = [Refusal(row, "IntegrityError", "CHECK failed") for row in rows]
    assert deadletters_add(refused=refused) == []
    return rows


def test_support_staff_see_every_organisations_dead_letters(as_user, letters):
    response = as_user("sam").get(URL)
    assert response.status_code == 200
    body = response.content.decode()
    for row in letters:
        assert row["request_id"] in body and row["model"] in body
    assert "acme" in body and "globex" in body
    assert "POST /responses/compact" in body and "IntegrityError: CHECK failed" in body
    # The row's text stays out of the page, as out of the logs.
    assert "secret-agent" not in body
    assert 'href="/console/support/dead-letters/"' in body


@pytest.mark.parametrize("person", ["alice", "erin", "charlie"])
def test_an_organisations_members_do_not_find_the_page(as_user, letters, person):
    response = as_user(person).get(URL)
    assert response.status_code == 404
    assert letters[0]["request_id"] not in response.content.decode()
    assert "/console/support/dead-letters/" not in as_user(person).get("/console/").content.decode()


def test_the_dashboard_points_support_staff_to_them(as_user, crew, letters):
    from accounts.services.members import member_ensure

    member_ensure(organisation=crew["acme"], email="sam@example.com", role="viewer")
    body = as_user("sam").get(reverse("console:dashboard")).content.decode()
    # Every organisation's: at least these two (a usage writer this process
    # ran for an earlier test may have left its own).
    shown = re.search(r"(\d+) usage rows refused by the database\.", body)
    callout = re.search(r'<div class="callout warn" id="dead-letters">.*?</div>', body)
    assert shown and int(shown.group(1)) >= len(letters), callout or body[:3000]
    assert f'<a href="{URL}">See them</a>' in body


def test_signed_out_visitors_are_sent_to_sign_in(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/console/login/" in response.url
