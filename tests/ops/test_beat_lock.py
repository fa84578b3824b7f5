"""Two Celery beats side by side send each scheduled task once per period.

``claim`` is the guard (real Redis when ``REDIS_URL`` is set, this process
otherwise); the last test runs two real ``celery beat`` processes against a
Redis server of its own and watches the broker's queue: the usage drain
(every 5 s) arrives once per period, not twice, and keeps arriving when the
beat that was sending it is killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
import redis
from django.conf import settings

from responses_api.runtime import once
from tests.conftest import ROOT, _log_path, wait_for
from tests.ops.outages import redis_server

DRAIN = "responses_api.tasks.drain_usage"
# The beats' usage drain period: short, so that a few periods pass quickly,
# yet long enough that two unguarded beats started together (their phases a
# start-up apart) send at gaps well under the guard's hold.
PERIOD = 2.0


def test_a_period_is_claimed_once_then_again_after_it():
    name = f"test:{uuid.uuid4().hex}"
    assert once.claim(name, 0.5) is True
    assert once.claim(name, 0.5) is False
    assert once.claim(f"{name}:other", 0.5) is True  # another entry has its own turn
    started = time.monotonic()
    wait_for(lambda: once.claim(name, 0.5), timeout=10)
    assert time.monotonic() - started >= 0.3  # the claim held for most of the period


def test_the_claim_is_shared_through_redis_when_there_is_one():
    if not settings.REDIS_URL:
        pytest.skip("REDIS_URL is not set: the claim is this process's own")
    name = f"test:{uuid.uuid4().hex}"
    assert once.claim(name, 5)
    # Another process (another beat) finds it taken: same key, same server.
    other = redis.Redis.from_url(settings.REDIS_URL)
    assert other.get(once.PREFIX + name) is not None
    assert 0 < other.pttl(once.PREFIX + name) <= 4500
    assert other.set(once.PREFIX + name, "other-beat", nx=True, px=1000) is None


def _start_beat(url: str, directory, name: str) -> tuple[subprocess.Popen, object]:
    env = {
        **os.environ,
        "REDIS_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SWITCHYARD_USAGE_DRAIN_SECONDS": str(PERIOD),
    }
    env.pop("DATABASE_URL", None)  # beat reads no database
    log = _log_path(f"beat-{name}")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "--loglevel=INFO",
            f"--schedule={directory / name}",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    return process, log


@pytest.mark.live
def test_two_beats_send_the_usage_drain_once_per_period_and_survive_one_dying(tmp_path):
    with redis_server(tmp_path) as server:
        url = server.url(0)
        queue = redis.Redis.from_url(url)
        beats = {name: _start_beat(url, tmp_path, name) for name in ("a", "b")}
        arrivals: list[float] = []

        def drained() -> int:
            # Take the drain messages off the broker's queue as they come.
            while raw := queue.lpop("celery"):
                if json.loads(raw)["headers"]["task"] == DRAIN:
                    arrivals.append(time.monotonic())
            for name, (process, log) in beats.items():
                if process.poll() is not None and name not in stopped:
                    raise RuntimeError(f"beat {name} exited: {log.read_text()}")
            return len(arrivals)

        stopped: set[str] = set()
        try:
            for _, log in beats.values():
                wait_for(lambda log=log: "beat: Starting" in log.read_text(), timeout=60)
            wait_for(lambda: drained() >= 3, timeout=6 * PERIOD, interval=0.05)
            gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
            # Both beats send one every PERIOD, at their own phase: unguarded,
            # two arrive per period, at most a beat's start-up apart.
            assert all(gap >= once.HOLD * PERIOD - 0.5 for gap in gaps), gaps

            # Kill the beat that sent them; the other takes the turns over.
            sender = max(
                beats, key=lambda n: beats[n][1].read_text().count("Sending due task usage-drain")
            )
            stopped.add(sender)
            beats[sender][0].kill()
            beats[sender][0].wait()
            killed_at = time.monotonic()
            seen = len(arrivals)
            wait_for(lambda: drained() >= seen + 2, timeout=6 * PERIOD, interval=0.05)
            survivor = next(n for n in beats if n != sender)
            assert "Sending due task usage-drain" in beats[survivor][1].read_text()
            # At most one period of claim and one period of schedule without a drain.
            assert arrivals[seen] - killed_at <= 2 * PERIOD + 1
        finally:
            for process, _ in beats.values():
                if process.poll() is None:
                    process.terminate()
                    process.wait(10)
