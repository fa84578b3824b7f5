"""A backend's answer is untrusted input.

Chunks of the wrong shape (a number for text, a string for ``choices``, a
list for ``usage``), negative or absurd counts and chunks that are no chat
chunk at all end the request as the backend's fault — a 502
``backend_error`` naming the backend before anything was sent, or
``response.failed`` after — with one usage row each, and the process goes
on serving at once. A backend that never sends a token to a non-streamed
request is a 504 after the model's first-token timeout. Usage counts that
are each a count but together impossible are corrected before they are
billed.
"""

from __future__ import annotations

import time

import pytest
from openai import APIStatusError, OpenAI

from tests.conftest import usage_rows, wait_for
from tests.hostile import MALFORMED, HostileBackend
from tests.support import healthz_watch

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def hostile():
    with HostileBackend() as backend:
        yield backend


@pytest.fixture
def acme(provision, hostile):
    return provision("acme", hostile.url, backend_name="hostile")


@pytest.fixture
def client(api_server, acme):
    return OpenAI(base_url=api_server.url + "/v1", api_key=acme.key, max_retries=0, timeout=30)


def _rows_settle(organisation, count: int):
    return wait_for(
        lambda: (rows := usage_rows(organisation=organisation)) and len(rows) >= count and rows,
        timeout=30,
    )


def _still_serving(client) -> None:
    """Normal requests right after are answered, the fastest within 500 ms
    (the fastest of two: scheduling hiccups of a loaded 2-core machine are
    no broken process, which would not answer at all, or only once a stuck
    loop let go, seconds later)."""
    took = []
    for _ in range(2):
        started = time.perf_counter()
        answer = client.responses.create(model="sim-model", input="hello")
        took.append(time.perf_counter() - started)
        assert answer.output_text == "Hello world"
    assert min(took) < 0.5, took


@pytest.mark.parametrize("behaviour", MALFORMED)
def test_malformed_answer_is_a_502_naming_the_backend(client, acme, behaviour):
    with pytest.raises(APIStatusError) as caught:
        client.responses.create(model="sim-model", input=f"hostile:{behaviour}")
    assert caught.value.status_code == 502
    error = caught.value.response.json()["error"]
    assert error["code"] == "backend_error"
    assert "Backend 'hostile'" in error["message"]
    assert caught.value.response.headers["x-request-id"]
    _still_serving(client)
    rows = _rows_settle(acme.organisation, 3)
    assert len(rows) == 3
    failed = next(r for r in rows if r.status != 200)
    assert failed.status == 502 and failed.error_code == "backend_error"
    assert "backend_error" in failed.notices
    assert failed.input_tokens >= 0 and failed.output_tokens >= 0


@pytest.mark.parametrize("behaviour", MALFORMED)
def test_malformed_chunk_in_a_stream_ends_with_response_failed(client, acme, behaviour):
    with client.responses.stream(model="sim-model", input=f"hostile:{behaviour}") as stream:
        events = list(stream)
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.error.code == "server_error"
    assert "Backend 'hostile'" in last.response.error.message
    notices = last.response.model_extra["switchyard"]["notices"]
    assert any(n["code"] == "backend_error" for n in notices)
    _still_serving(client)
    rows = _rows_settle(acme.organisation, 3)
    assert len(rows) == 3
    failed = next(r for r in rows if r.status != 200)
    assert failed.status == 502 and failed.error_code == "backend_error"


def test_text_before_the_bad_chunk_still_reaches_the_stream(client, acme):
    with client.responses.stream(model="sim-model", input="hostile:content-int") as stream:
        events = list(stream)
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert deltas == ["Hello"]
    assert events[-1].type == "response.failed"


def test_invalid_json_in_the_stream_is_a_502(client, acme):
    with pytest.raises(APIStatusError) as caught:
        client.responses.create(model="sim-model", input="hostile:not-json")
    assert caught.value.status_code == 502
    _still_serving(client)
    assert len(_rows_settle(acme.organisation, 3)) == 3


@pytest.mark.parametrize("behaviour", ["hang", "hang-after-headers"])
def test_silent_backend_is_a_504_after_the_first_token_timeout(client, acme, behaviour):
    from responses_api.models import ServedModel

    # Set before any request of this organisation, whose catalogue the server
    # therefore has yet to load (and cache): the first request reads it.
    ServedModel.objects.filter(pk=acme.model.pk).update(first_token_timeout=1)
    started = time.perf_counter()
    with pytest.raises(APIStatusError) as caught:
        client.responses.create(model="sim-model", input=f"hostile:{behaviour}")
    took = time.perf_counter() - started
    assert caught.value.status_code == 504
    assert caught.value.response.json()["error"]["code"] == "backend_timeout"
    assert 0.9 < took < 5
    _still_serving(client)
    rows = _rows_settle(acme.organisation, 3)
    assert len(rows) == 3
    assert sorted(r.status for r in rows) == [200, 200, 504]


@pytest.mark.parametrize("stream", [True, False])
def test_an_error_inside_the_stream_is_not_echoed(client, acme, stream):
    if stream:
        with client.responses.stream(model="sim-model", input="hostile:error-secret") as events:
            last = list(events)[-1]
        assert last.type == "response.failed"
        message = last.response.error.message
    else:
        with pytest.raises(APIStatusError) as caught:
            client.responses.create(model="sim-model", input="hostile:error-secret")
        assert caught.value.status_code == 502
        message = caught.value.response.json()["error"]["message"]
    assert message == "Backend 'hostile' reported an error mid-stream."
    row = _rows_settle(acme.organisation, 1)[0]
    assert row.status == 502 and "s3cr3t" in row.error_message


@pytest.mark.parametrize("stream", [True, False])
def test_impossible_usage_is_corrected_before_it_is_billed(api_server, client, acme, stream):
    """A backend claiming 10⁸ cached tokens of a 10-token prompt, 50
    reasoning tokens of 4 output tokens and a total of its own is billed
    for what is possible: cached within the input, reasoning within the
    output, the total their sum. The row notes the correction, and the
    organisation's budget is charged the corrected cost only. The process's
    ``/healthz`` answers meanwhile, and after."""
    from decimal import Decimal

    from accounts.audit import CLI
    from accounts.services.organisations import organisation_settings_update
    from responses_api.catalogue.services.served_models import model_ensure
    from responses_api.usage.monthly import month_spent
    from tests.routing.test_spend_limits import forget_counters

    # Set before any request of this organisation: the server loads them fresh.
    # 0.5 per million cached input tokens (10⁸ of them would be 50.00) and
    # 0.25 per output token: the corrected answer costs 1.000005.
    model_ensure(
        organisation=acme.organisation,
        public_id="sim-model",
        backend=acme.backend,
        price_input=Decimal(0),
        price_cached_input=Decimal("0.5"),
        price_output=Decimal(250_000),
    )
    organisation_settings_update(
        organisation=acme.organisation, actor=CLI, data={"monthly_budget": Decimal("2.00")}
    )
    forget_counters(acme.organisation)
    with healthz_watch(api_server.url, interval=0.01):
        if stream:
            with client.responses.stream(
                model="sim-model", input="hostile:usage-impossible"
            ) as events:
                answer = list(events)[-1].response
        else:
            answer = client.responses.create(model="sim-model", input="hostile:usage-impossible")
    assert answer.status == "completed" and answer.output_text == "Hello world"
    usage = answer.usage
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (10, 10)
    assert (usage.output_tokens, usage.output_tokens_details.reasoning_tokens) == (4, 4)
    assert usage.total_tokens == 14
    extras = answer.model_extra["switchyard"]
    assert extras["cost"] == pytest.approx(1.000005)
    corrected = [n for n in extras["notices"] if n["code"] == "backend_usage_corrected"]
    assert len(corrected) == 1 and "100000000 cached of 10 input" in corrected[0]["message"]

    row = _rows_settle(acme.organisation, 1)[0]
    assert row.status == 200 and row.stream is stream
    counts = (row.input_tokens, row.cached_tokens, row.output_tokens, row.reasoning_tokens)
    assert counts == (10, 10, 4, 4)
    assert row.cost == Decimal("1.000005")
    assert "backend_usage_corrected" in row.notices
    assert month_spent(acme.organisation.pk) == (Decimal("1.000005"), 14)
    # The budget counter was charged the same: under the 2.00 budget, the
    # organisation is still served (charged 50.00, it would be refused).
    follow = client.responses.create(model="sim-model", input="hello")
    assert follow.output_text == "Hello world"
    assert not any(
        n["code"] == "backend_usage_corrected" for n in follow.model_extra["switchyard"]["notices"]
    )
    later = _rows_settle(acme.organisation, 2)
    assert [r.notices for r in later][1] == []


def test_impossible_usage_is_corrected_on_a_websocket_turn(api_server, client, acme):
    """A WebSocket turn takes the same way: the turn's usage, its row and
    the notice are the corrected figures, and ``/healthz`` answers
    meanwhile, and after."""
    from tests.api.test_websocket import BETA, until_done

    with (
        healthz_watch(api_server.url, interval=0.01),
        client.responses.connect(extra_headers=BETA) as connection,
    ):
        connection.response.create(model="sim-model", input="hostile:usage-impossible")
        last = until_done(connection)[-1]
    assert last.type == "response.completed", last
    usage = last.response.usage
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (10, 10)
    assert (usage.output_tokens, usage.output_tokens_details.reasoning_tokens) == (4, 4)
    assert usage.total_tokens == 14
    notices = last.response.model_extra["switchyard"]["notices"]
    assert [n["code"] for n in notices].count("backend_usage_corrected") == 1
    row = _rows_settle(acme.organisation, 1)[0]
    counts = (row.input_tokens, row.cached_tokens, row.output_tokens, row.reasoning_tokens)
    assert counts == (10, 10, 4, 4)
    assert "backend_usage_corrected" in row.notices
