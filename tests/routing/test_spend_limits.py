"""Monthly spend limits: a budget and a token quota per key and per
organisation, counted across every web process (two daphnes sharing Redis
when REDIS_URL is set), settled from the usage rows and rebuilt from them
when a counter is gone. Also the cost each reply reports."""

from __future__ import annotations

import os
from decimal import Decimal

import httpx
import openai
import pytest

from tests.conftest import server_env, start_daphne, wait_rows
from tests.routing.conftest import KEEPALIVE, QUEUE_TIMEOUT

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# 0.25 per output token and free input: "[[tokens:4]]" costs exactly 1.00.
PRICES = {
    "price_input": Decimal(0),
    "price_cached_input": Decimal(0),
    "price_output": Decimal(250_000),
}
ONE_DOLLAR = "hi [[tokens:4]]"


def post(url: str, key: str, text: str = ONE_DOLLAR, **extra) -> httpx.Response:
    return httpx.post(
        url + "/v1/responses",
        headers={"authorization": f"Bearer {key}"},
        json={"model": "sim-model", "input": text, **extra},
        timeout=30,
    )


def forget_counters(organisation) -> None:
    """Counters of an organisation id that an earlier test database used."""
    if not os.environ.get("REDIS_URL"):
        return
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        for key in client.scan_iter(match=f"sy:spend:organisation:{organisation.id}:*"):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
def priced(sims, fleet_for):
    """A fleet whose model has the prices above, counters starting clean."""
    from responses_api.catalogue.services.served_models import model_ensure

    def make(*, org: str = "acme", **key_options):
        fleet = fleet_for(sims[:1], org=org, **key_options)
        model_ensure(
            organisation=fleet.organisation,
            public_id="sim-model",
            backend=fleet.backends[0],
            **PRICES,
        )
        forget_counters(fleet.organisation)
        return fleet

    return make


def refusal(response: httpx.Response) -> dict:
    assert response.status_code == 429, response.text
    assert response.headers["x-should-retry"] == "false"
    assert "retry-after" not in response.headers
    error = response.json()["error"]
    assert error["code"] == "insufficient_quota" and error["type"] == "insufficient_quota"
    return error


def test_key_budget_refuses_the_request_after_the_one_that_reached_it(web, priced):
    fleet = priced(monthly_budget=Decimal("3.00"))
    responses = [post(web.next_url(), fleet.key) for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    for response in responses[:3]:
        assert response.headers["x-switchyard-cost"] == "1.00000000"
        assert response.json()["switchyard"]["cost"] == 1.0
    error = refusal(responses[3])
    assert "This API key has reached its monthly budget (3.00 of 3.00 used" in error["message"]
    rows = wait_rows(4, organisation=fleet.organisation)
    assert [(r.status, r.cost) for r in rows] == [(200, Decimal(1))] * 3 + [(429, Decimal(0))]
    assert rows[3].error_code == "insufficient_quota"


def test_organisation_token_quota_counts_all_its_keys(web, priced, people):
    from accounts.audit import CLI
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_settings_update

    # What one request counts: its input and output tokens.
    probe = priced(org="globex")
    usage = post(web.next_url(), probe.key).json()["usage"]
    per_request = usage["input_tokens"] + usage["output_tokens"]
    fleet = priced()
    organisation_settings_update(
        organisation=people["acme"], actor=CLI, data={"monthly_tokens": 2 * per_request}
    )
    _, other = api_key_create(organisation=people["acme"], name="second")
    statuses = [post(web.next_url(), key).status_code for key in (fleet.key, other)]
    assert statuses == [200, 200]
    error = refusal(post(web.next_url(), other))
    assert "This organisation has reached its monthly token quota" in error["message"]
    assert f"{2 * per_request} of {2 * per_request} tokens" in error["message"]
    # Globex has no quota and is not counted with Acme.
    assert post(web.next_url(), probe.key).status_code == 200


def test_soft_threshold_adds_a_notice_streamed_and_not(web, priced):
    fleet = priced(monthly_budget=Decimal("5"))
    for _ in range(4):  # 0 %, 20 %, 40 %, 60 % spent before each
        body = post(web.next_url(), fleet.key).json()
        assert "budget_near_limit" not in {n["code"] for n in body["switchyard"]["notices"]}
    client = openai.OpenAI(base_url=web.next_url() + "/v1", api_key=fleet.key, max_retries=0)
    with client.responses.stream(model="sim-model", input=ONE_DOLLAR) as stream:
        final = stream.get_final_response().to_dict()
    (notice,) = [n for n in final["switchyard"]["notices"] if n["code"] == "budget_near_limit"]
    assert notice["message"] == ("This API key has used 80% of its monthly budget (4.00 of 5.00).")
    assert final["switchyard"]["cost"] == 1.0
    with pytest.raises(openai.RateLimitError) as refused:
        client.responses.create(model="sim-model", input=ONE_DOLLAR)
    assert refused.value.code == "insufficient_quota"
    rows = wait_rows(6, organisation=fleet.organisation)
    assert "budget_near_limit" in rows[4].notices


def test_the_openai_sdk_does_not_retry_a_spent_budget(web, priced):
    fleet = priced(monthly_budget=Decimal("1"))
    client = openai.OpenAI(base_url=web.next_url() + "/v1", api_key=fleet.key, max_retries=2)
    client.responses.create(model="sim-model", input=ONE_DOLLAR)
    with pytest.raises(openai.RateLimitError) as refused:
        client.responses.create(model="sim-model", input=ONE_DOLLAR)
    assert "API key has reached its monthly budget" in refused.value.message
    rows = wait_rows(2, organisation=fleet.organisation)
    # One refusal, not three: the SDK honoured x-should-retry.
    assert sorted(r.status for r in rows) == [200, 429]


def test_cost_in_the_header_and_body_matches_the_row(web, priced):
    fleet = priced()
    client = openai.OpenAI(base_url=web.next_url() + "/v1", api_key=fleet.key, max_retries=0)
    raw = client.responses.with_raw_response.create(model="sim-model", input="hi [[tokens:3]]")
    body = raw.parse().to_dict()
    assert raw.headers["x-switchyard-cost"] == "0.75000000"
    assert body["switchyard"]["cost"] == 0.75
    with client.responses.stream(model="sim-model", input="hi [[tokens:5]]") as stream:
        final = stream.get_final_response().to_dict()
    assert final["switchyard"]["cost"] == 1.25
    rows = wait_rows(2, organisation=fleet.organisation)
    assert [r.cost for r in rows] == [Decimal("0.75"), Decimal("1.25")]


def test_a_lost_counter_is_rebuilt_from_the_usage_rows(django_db_setup, priced):
    """A fresh process (embedded: its counters are gone with the old one) or
    counters deleted from Redis: the month's rows give the count back."""
    env = server_env(
        SWITCHYARD_QUEUE_TIMEOUT=str(QUEUE_TIMEOUT), SWITCHYARD_KEEPALIVE_SECONDS=str(KEEPALIVE)
    )
    fleet = priced(monthly_budget=Decimal("3"))
    server = start_daphne(env)
    try:
        assert [post(server.url, fleet.key).status_code for _ in range(2)] == [200, 200]
    finally:
        server.stop()
    wait_rows(2, organisation=fleet.organisation)
    if os.environ.get("REDIS_URL"):
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        deleted = sum(client.delete(k) for k in client.scan_iter(match="sy:spend:key:*"))
        client.close()
        assert deleted >= 2
    server = start_daphne(env)
    try:
        assert post(server.url, fleet.key).status_code == 200
        error = refusal(post(server.url, fleet.key))
        assert "(3.00 of 3.00 used" in error["message"]
    finally:
        server.stop()
