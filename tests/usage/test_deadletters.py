"""Rows the database refuses are dead letters: kept in a table both modes
share, counted and logged by request id, listed and replayed by ``manage.py
usage_deadletters``; the rest of their batch is written, and the writer
goes on."""

from __future__ import annotations

import io
import logging
import os

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from prometheus_client import REGISTRY

from accounts.models import Organisation
from responses_api.models import UsageDeadLetter, UsageLog
from responses_api.usage import writer as usage
from tests.conftest import usage_rows
from tests.usage.test_durability import a_row

pytestmark = pytest.mark.django_db(transaction=True)

needs_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="the usage stream lives in Redis: set REDIS_URL (CI does)",
)


def dead_letters_counted(reason: str) -> float:
    return REGISTRY.get_sample_value("switchyard_usage_dead_letters_total", {"reason": reason}) or 0


def run(*args: str) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("usage_deadletters", *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return out.getvalue(), exc.returncode
    return out.getvalue(), 0


@pytest.fixture
def doomed(people):
    """An organisation deleted after its request was answered: its row can
    never be inserted until the organisation is back."""
    from accounts.services.organisations import organisation_ensure

    org, _ = organisation_ensure(slug="doomed", name="Doomed")
    row = a_row(org.pk, user_agent="secret-agent/1", session_id="s-secret")
    pk = org.pk
    org.delete()
    return pk, row


def test_a_refused_row_is_kept_and_the_rest_of_its_batch_written(people, doomed, caplog):
    org_id, orphan = doomed
    before = dead_letters_counted("IntegrityError")
    first, last = a_row(people["acme"].id), a_row(people["acme"].id)
    with caplog.at_level(logging.ERROR):
        assert usage.write_rows([first, orphan, last]) == [orphan]
    assert sorted(str(r.request_id) for r in usage_rows()) == sorted(
        [first["request_id"], last["request_id"]]
    )
    letter = UsageDeadLetter.objects.get()
    assert (letter.request_id, letter.organisation_id) == (orphan["request_id"], org_id)
    assert letter.error.startswith("IntegrityError")
    assert orjson.loads(letter.row)["user_agent"] == "secret-agent/1"
    assert dead_letters_counted("IntegrityError") == before + 1
    # One log line, by request id and error class; none of the row's text.
    logged = [r.getMessage() for r in caplog.records if r.name == "responses_api.usage.deadletters"]
    assert len(logged) == 1 and orphan["request_id"] in logged[0] and "IntegrityError" in logged[0]
    assert not any("secret" in r.getMessage() for r in caplog.records)
    # The writer goes on, and a refused row delivered again is one entry.
    later = a_row(people["acme"].id)
    assert usage.write_rows([later, orphan]) == [orphan]
    assert UsageDeadLetter.objects.count() == 1 and len(usage_rows()) == 3
    assert dead_letters_counted("IntegrityError") == before + 1


def test_the_command_lists_and_replays_once_the_condition_is_fixed(people, doomed):
    org_id, orphan = doomed
    usage.write_rows([orphan])
    text, code = run()
    assert code == 0 and orphan["request_id"] in text and f"(deleted {org_id})" in text
    (entry,) = [orjson.loads(line) for line in run("--json")[0].splitlines()]
    assert entry["request_id"] == orphan["request_id"]
    assert entry["organisation_id"] == org_id and entry["organisation"] is None
    assert entry["error"].startswith("IntegrityError") and entry["created_at"]

    # Still refused: the entry stays, with its new error; exit status 1.
    UsageDeadLetter.objects.update(error="old")
    text, code = run("--replay")
    assert code == 1 and "0 written, 1 still refused" in text
    assert UsageDeadLetter.objects.get().error.startswith("IntegrityError")
    assert usage_rows() == []

    Organisation.objects.create(pk=org_id, slug="doomed", name="Doomed again")
    text, code = run("--replay")
    assert code == 0 and "1 written, 0 still refused" in text
    assert UsageDeadLetter.objects.count() == 0
    row = UsageLog.objects.get(request_id=orphan["request_id"])
    assert row.organisation_id == org_id and row.output_tokens == 7
    assert run("--replay") == ("No dead letters.\n", 0)


def test_replay_is_idempotent_and_repairs_the_row(people):
    """A dead letter whose row is in the log already counts as written; a
    row refused under older rules is written by today's."""
    row = a_row(people["acme"].id, input_tokens=-5, session_id="a\x00b")
    from responses_api.usage.deadletters import Refusal, deadletters_add

    assert deadletters_add(refused=[Refusal(row, "IntegrityError", "CHECK failed")]) == []
    assert UsageDeadLetter.objects.get().organisation_id == people["acme"].id
    twin = UsageDeadLetter.objects.get()
    twin.pk = None  # the same row, parked twice
    twin.save()
    text, code = run("--replay")
    assert code == 0 and "2 written" in text
    stored = UsageLog.objects.get()
    assert stored.input_tokens == 0 and stored.session_id == "a\ufffdb"
    assert UsageDeadLetter.objects.count() == 0


def test_deleting_and_purging(people, doomed):
    _, orphan = doomed
    other = a_row(doomed[0])
    usage.write_rows([orphan, other])
    first, second = UsageDeadLetter.objects.values_list("pk", flat=True)
    assert run("--delete", str(first), "999999") == ("1 deleted.\n", 1)
    assert list(UsageDeadLetter.objects.values_list("pk", flat=True)) == [second]
    assert run("--purge") == ("1 deleted.\n", 0)
    assert UsageDeadLetter.objects.count() == 0


@needs_redis
def test_entries_on_the_old_redis_dead_stream_are_moved_to_the_table(
    people, doomed, redis_stream, settings
):
    _, orphan = doomed
    settings.REDIS_URL = os.environ["REDIS_URL"]
    dead = usage.dead_letter_stream()
    redis_stream.xadd(dead, {"r": usage.encode_row(orphan)})  # as earlier versions parked rows
    redis_stream.xadd(dead, {"r": orjson.dumps({"fields": "{b'r': b'{not json'}"})})
    text, code = run("--json")
    assert code == 0 and redis_stream.xlen(dead) == 0
    listed = [orjson.loads(line) for line in text.splitlines()]
    assert sorted(e["request_id"] for e in listed) == sorted(["", orphan["request_id"]])
    text, code = run("--replay")
    assert code == 1 and "1 still refused, 1 undecodable" in text


@needs_redis
def test_a_refused_row_in_the_stream_is_acknowledged_as_a_dead_letter(people, doomed, redis_stream):
    _, orphan = doomed
    good = a_row(people["acme"].id)
    for row in (orphan, good):
        redis_stream.xadd(usage.stream(), {"r": usage.encode_row(row)})
    assert usage.drain_redis(redis_stream, consumer="w") == 2
    assert [str(r.request_id) for r in usage_rows()] == [good["request_id"]]
    assert UsageDeadLetter.objects.get().request_id == orphan["request_id"]
    assert redis_stream.xpending(usage.stream(), usage.GROUP)["pending"] == 0


def test_the_dashboard_shows_the_count_to_whom_it_concerns(people, doomed):
    """Members see their organisation's dead letters; platform staff all."""
    from django.test import Client

    _, orphan = doomed
    usage.write_rows([orphan, a_row(999_998)])
    letter = UsageDeadLetter.objects.first()
    assert letter is not None
    UsageDeadLetter.objects.filter(pk=letter.pk).update(organisation_id=people["acme"].id)

    def dashboard(user) -> str:
        client = Client()
        client.force_login(user)
        response = client.get(reverse("console:dashboard"))
        assert response.status_code == 200
        return response.content.decode()

    bob = people["bob"]
    assert "1 usage row refused" in dashboard(bob)
    assert 'id="dead-letters"' not in dashboard(people["charlie"])
    alice = people["alice"]
    alice.is_superuser = True
    alice.save()
    assert "2 usage rows refused" in dashboard(alice)
