"""An id holding a NUL (which PostgreSQL refuses in any text parameter) is
answered as any unknown id: a 404 for a response, a 400 naming the field for
what a request continues or refers to; never a 500. The request's usage row
is written, the NUL replaced."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import wait_for
from tests.inprocess import Gateway
from tests.store.test_tenancy import asks

pytestmark = pytest.mark.django_db(transaction=True)


def _asks(gateway: Gateway, key: str, nul: str) -> list[httpx.Response]:
    """Each way of naming a response or an item, with ``nul`` in the id."""
    path_id = f"resp_{nul and '%00'}abc"
    return asks(gateway, key, f"resp_{nul}abc", f"msg_{nul}abc", path_id=path_id)


def test_a_nul_in_an_id_is_not_found_like_any_unknown_id(gateway, acme):
    nul = _asks(gateway, acme.key, "\x00")
    unknown = _asks(gateway, acme.key, "")
    assert [r.status_code for r in nul] == [404, 404, 400, 400, 404]
    assert [r.status_code for r in nul] == [r.status_code for r in unknown]
    for with_nul, without in zip(nul, unknown, strict=True):
        assert with_nul.json()["error"]["code"] == without.json()["error"]["code"]
        assert with_nul.json()["error"]["param"] == without.json()["error"]["param"]
    assert nul[2].json()["error"]["param"] == "previous_response_id"
    assert nul[3].json()["error"]["param"] == "input[1]"


def test_a_nul_in_the_path_still_makes_a_usage_row(gateway, acme):
    from responses_api.models import UsageLog

    headers = {"authorization": f"Bearer {acme.key}", "session-id": "s"}
    reply = gateway.http.get("/v1/responses/%00abc", headers=headers, timeout=30)
    assert reply.status_code == 404
    row = wait_for(lambda: UsageLog.objects.filter(status=404).first())
    assert "\x00" not in row.endpoint and row.organisation_id == acme.organisation.id
