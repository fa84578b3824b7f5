"""A NUL in a console path (PostgreSQL refuses one in a query) is a 404
like any unknown id, never a 500."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_a_session_id_with_a_nul_is_not_found(as_user, estates):
    client = as_user("alice")
    assert client.get("/console/usage/sessions/%00/").status_code == 404
    assert client.get("/console/usage/sessions/a%00b/").status_code == 404
    assert client.get("/console/usage/sessions/unknown/").status_code == 404
