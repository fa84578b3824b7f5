"""A request id with no row anywhere: the trace page points support staff to the logs."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_support_staff_are_told_an_unknown_id_may_be_a_request_refused_before_authentication(
    as_user, estates
):
    request_id = str(uuid.uuid4())
    response = as_user("sam").get(reverse("console:trace_search"), {"q": request_id})
    assert response.status_code == 404
    body = response.content.decode()
    assert "No usage row exists" in body and "in any organisation" in body
    assert "refused before authentication" in body
    assert "<code>request refused</code>" in body and f"request_id={request_id}" in body


def test_members_still_see_the_organisation_scoped_answer(as_user, estates):
    response = as_user("bob").get(reverse("console:trace_search"), {"q": str(uuid.uuid4())})
    body = response.content.decode()
    assert response.status_code == 404 and "No request" in body
    assert "refused before authentication" not in body
