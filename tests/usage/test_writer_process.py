"""``manage.py write_usage``: the usage writer as a process of its own, as
deployments run it beside web processes that leave writing to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.core.management import CommandError, call_command

from responses_api.usage import writer as usage
from tests.conftest import ROOT, _log_path, server_env, start_daphne, usage_rows, wait_for
from tests.usage.test_durability import a_row, needs_redis, xadd


def start_writer(**env: str) -> tuple[subprocess.Popen, Path]:
    """``write_usage`` on this test's stream, logging to a file of its own."""
    log = _log_path("write-usage")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "write_usage", "--interval", "0.05"],
        cwd=ROOT,
        env=server_env(SWITCHYARD_USAGE_STREAM=usage.stream(), LOG_FORMAT="text", **env),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    return process, log


def test_the_writer_refuses_to_start_without_redis(settings):
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match="REDIS_URL"):
        call_command("write_usage")


@pytest.mark.live
@needs_redis
@pytest.mark.django_db(transaction=True)
def test_the_writer_commits_what_web_processes_queue_and_stops_cleanly(
    provision, simulator, redis_stream
):
    tenant = provision("acme", simulator.url)
    # Rows already waiting when the writer starts, and rows from a web
    # process that writes none itself.
    waiting = [a_row(tenant.organisation.id) for _ in range(40)]
    for row in waiting:
        xadd(redis_stream, row)
    web = start_daphne(
        server_env(SWITCHYARD_USAGE_STREAM=usage.stream(), SWITCHYARD_USAGE_DRAIN_IN_WEB="false")
    )
    writer, log = start_writer()
    try:
        ids = []
        for n in range(5):
            answer = httpx.post(
                web.url + "/v1/responses",
                headers={"authorization": f"Bearer {tenant.key}"},
                json={"model": "sim-model", "input": f"turn {n} [[tokens:3]]"},
                timeout=30,
            )
            assert answer.status_code == 200
            ids.append(answer.headers["x-request-id"])
        wait_for(lambda: len(usage_rows()) == 45, timeout=30)
        written = {str(r.request_id) for r in usage_rows()}
        assert set(ids) | {r["request_id"] for r in waiting} == written
        # Committed rows leave the stream; nothing is left pending.
        wait_for(lambda: redis_stream.xlen(usage.stream()) == 0, timeout=10)
        assert redis_stream.xpending(usage.stream(), usage.GROUP)["pending"] == 0
        writer.send_signal(signal.SIGTERM)
        assert writer.wait(15) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
        web.stop()
    assert "usage writer stopped after 45 rows" in log.read_text()


@pytest.mark.live
@needs_redis
@pytest.mark.django_db(transaction=True)
def test_the_writer_waits_for_a_database_that_is_down_and_loses_nothing(people, redis_stream):
    """A database it cannot reach: the writer retries, acknowledging nothing."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("a database server to be unreachable: PostgreSQL")
    row = a_row(people["acme"].id)
    xadd(redis_stream, row)
    writer, log = start_writer(DATABASE_URL="postgres://postgres@127.0.0.1:1/nothing")
    try:
        wait_for(lambda: "could not be written" in log.read_text(), timeout=30)
        assert redis_stream.xlen(usage.stream()) == 1
        writer.send_signal(signal.SIGTERM)
        assert writer.wait(15) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
    # Another writer, with the database back, takes the row over.
    assert usage.drain_redis(redis_stream, consumer="back", claim_idle_ms=0) == 1
    assert [str(r.request_id) for r in usage_rows()] == [row["request_id"]]
