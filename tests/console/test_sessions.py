"""Codex sessions: usage rows keep the client's session, thread and
request ids and its originator, from the real headers of captured Codex
turns; the console groups a session's turns on one page, filters the usage
log by session and exports the ids."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command
from django.urls import reverse

from console.templatetags.console import money
from tests import inprocess
from tests.conftest import wait_rows

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "codex"
SESSION = "01a226f6-be1c-7381-9639-485289c5c792"  # turn1 and turn2_after_exec
OTHER_SESSION = "01a226f6-c6a0-7840-bd85-5853cd299989"  # apply_patch_turn2
CODEX_HEADERS = ("session-id", "thread-id", "x-client-request-id", "originator", "user-agent")


def replay(http: httpx.Client, key: str, name: str, *, drop: tuple[str, ...] = ()) -> dict:
    """Send a captured Codex request with the headers Codex sent."""
    body = json.loads((FIXTURES / f"{name}_request.json").read_text())
    captured = json.loads((FIXTURES / f"{name}_request_headers.json").read_text())["headers"]
    headers = {k: v for k, v in captured.items() if k in CODEX_HEADERS and k not in drop}
    headers["authorization"] = f"Bearer {key}"
    with http.stream("POST", "/v1/responses", json=body, headers=headers, timeout=30) as r:
        assert r.status_code == 200, r.read()
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.completed"
    return captured


@pytest.fixture
def api(acme):
    """The API's clients, the ASGI application answering in-process."""
    with inprocess.serving() as gateway:
        yield gateway.http


@pytest.fixture
def acme(provision):
    from responses_api.catalogue.services.served_models import model_ensure

    tenant = provision("acme", inprocess.simulator().url)
    model_ensure(
        organisation=tenant.organisation,
        public_id="sim-model",
        backend=tenant.backend,
        price_input=Decimal("0.5"),
        price_cached_input=Decimal("0.1"),
        price_output=Decimal("2"),
    )
    return tenant


def test_codex_headers_are_recorded_on_each_turn(api, acme):
    captured = replay(api, acme.key, "turn1")
    replay(api, acme.key, "turn2_after_exec")
    replay(api, acme.key, "apply_patch_turn2")
    rows = wait_rows(3, organisation=acme.organisation)
    assert [r.session_id for r in rows] == [SESSION, SESSION, OTHER_SESSION]
    first = rows[0]
    assert first.thread_id == captured["thread-id"] == SESSION
    assert first.client_request_id == captured["x-client-request-id"]
    assert first.originator == "codex_exec"
    assert first.user_agent.startswith("codex_exec/0.171.0")
    assert first.cost > 0


def test_session_falls_back_to_x_session_id_then_prompt_cache_key_and_is_bounded(api, acme):
    def send(headers: dict, **body) -> None:
        response = api.post(
            "/v1/responses",
            headers={"authorization": f"Bearer {acme.key}", **headers},
            json={"model": "sim-model", "input": "hi", **body},
            timeout=30,
        )
        assert response.status_code == 200

    send({"x-session-id": "from-x-session-id"}, prompt_cache_key="ignored")
    send({}, prompt_cache_key="from-cache-key")
    send({"session-id": "s" * 300, "thread-id": "t" * 300, "originator": "o" * 300})
    rows = wait_rows(3, organisation=acme.organisation)
    assert [r.session_id for r in rows[:2]] == ["from-x-session-id", "from-cache-key"]
    assert (rows[2].session_id, rows[2].thread_id, rows[2].originator) == (
        "s" * 128,
        "t" * 128,
        "o" * 128,
    )


def test_the_session_page_shows_its_turns_in_order(api, acme, people):
    from django.test import Client

    replay(api, acme.key, "turn1")
    replay(api, acme.key, "apply_patch_turn2")
    replay(api, acme.key, "turn2_after_exec")
    rows = wait_rows(3, organisation=acme.organisation)
    turns = [r for r in rows if r.session_id == SESSION]
    alice = Client()
    alice.force_login(people["alice"])

    page = alice.get(reverse("console:session", args=[SESSION]))
    assert page.status_code == 200
    shown = page.context["turns"]
    assert [t.request_id for t in shown] == [t.request_id for t in turns]
    html = page.content.decode()
    assert html.index(str(turns[0].request_id)) < html.index(str(turns[1].request_id))
    assert str(rows[1].request_id) not in html  # the other session's turn
    totals = page.context["totals"]
    assert totals["turns"] == 2
    assert totals["cost"] == sum(t.cost for t in turns)
    assert totals["output_tokens"] == sum(t.output_tokens for t in turns)
    assert f'id="session-cost">{money(totals["cost"])} USD</div>' in html

    # The usage log links there and filters by session.
    log = alice.get(reverse("console:usage"))
    assert reverse("console:session", args=[SESSION]) in log.content.decode()
    filtered = alice.get(reverse("console:usage"), {"session": SESSION})
    assert {r.request_id for r in filtered.context["page"]} == {t.request_id for t in turns}

    # Another organisation's session is a missing page.
    charlie = Client()
    charlie.force_login(people["charlie"])
    assert charlie.get(reverse("console:session", args=[SESSION])).status_code == 404
    assert alice.get(reverse("console:session", args=["no-such-session"])).status_code == 404


def test_exports_include_the_client_ids(api, acme, people):
    from django.test import Client

    captured = replay(api, acme.key, "turn1")
    wait_rows(1, organisation=acme.organisation)
    alice = Client()
    alice.force_login(people["alice"])
    response = alice.get(reverse("console:usage_export"), {"session": SESSION})
    (row,) = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert row["session_id"] == SESSION and row["thread_id"] == captured["thread-id"]
    assert row["client_request_id"] == captured["x-client-request-id"]
    assert row["originator"] == "codex_exec"

    out = StringIO()
    call_command("usage_export", "--org", "acme", "--format", "jsonl", stdout=out)
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert (line["session_id"], line["originator"]) == (SESSION, "codex_exec")
    out = StringIO()
    call_command("usage_export", "--org", "acme", stdout=out)
    (exported,) = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert exported["client_request_id"] == captured["x-client-request-id"]
