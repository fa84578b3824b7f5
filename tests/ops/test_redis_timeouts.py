"""Every Redis client of the application is bounded in time: a server that
accepts connections and never answers fails its calls with Redis'
``TimeoutError`` (an outage to the callers) instead of holding them; and
the reads that wait on the server on purpose (``XREAD``/``XREADGROUP`` with
``BLOCK``) still wait as long as they ask, past the read timeout."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from config.settings_stores import redis_config, redis_timeouts
from responses_api.runtime import redis_conn
from responses_api.store import events
from responses_api.usage import writer as usage
from tests.ops.outages import redis_server, silent_server

TIMEOUT = 0.3


@pytest.fixture
def silent_redis(settings):
    with silent_server() as port:
        settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
        settings.SWITCHYARD_REDIS_TIMEOUT_SECONDS = TIMEOUT
        settings.SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS = TIMEOUT
        yield settings.REDIS_URL


@pytest.fixture
def own_redis(settings, tmp_path):
    with redis_server(tmp_path) as server:
        settings.REDIS_URL = server.url()
        settings.SWITCHYARD_REDIS_TIMEOUT_SECONDS = TIMEOUT
        yield server


def _timed(call):
    started = time.monotonic()
    with pytest.raises(redis.exceptions.TimeoutError):
        call()
    return time.monotonic() - started


def test_the_async_client_gives_up_on_a_redis_that_never_answers(silent_redis):
    async def get():
        return await redis_conn.async_client().get("k")

    assert _timed(lambda: asyncio.run(get())) < 5 * TIMEOUT


def test_a_script_batch_to_a_redis_that_never_answers_fails(silent_redis):
    async def batch():
        return await redis_conn.run_batch([("GET", "a"), ("GET", "b")])

    assert _timed(lambda: asyncio.run(batch())) < 5 * TIMEOUT


def test_the_sync_client_gives_up_on_a_redis_that_never_answers(silent_redis):
    # redis-py retries a timed-out call three times, backing off up to 10 s.
    assert _timed(lambda: redis_conn.sync_client().get("k")) < 30


def test_a_blocking_read_from_a_redis_that_never_answers_fails(silent_redis):
    async def follow():
        return await redis_conn.blocking(lambda client: client.xread({"s": "0-0"}, block=500), 0.5)

    assert _timed(lambda: asyncio.run(follow())) < 0.5 + 5 * TIMEOUT


def test_the_cache_is_bounded_too(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_REDIS_CONNECT_TIMEOUT_SECONDS", "1.5")
    monkeypatch.delenv("SWITCHYARD_REDIS_TIMEOUT_SECONDS", raising=False)
    caches, _, _ = redis_config("redis://127.0.0.1:6379/0", redis_timeouts())
    assert caches["default"]["OPTIONS"] == {"socket_connect_timeout": 1.5, "socket_timeout": 2.0}


def test_a_background_follower_waits_past_the_read_timeout(own_redis):
    """``events.read`` with a wait longer than the read timeout: the event
    appended meanwhile is read, and a quiet wait ends empty, no error."""
    wait = 4 * TIMEOUT

    async def follow():
        await events.append(1, "resp_quiet", 0, [b"first"])
        started = time.monotonic()
        quiet = await events.read(1, "resp_quiet", 0, wait=wait)
        waited = time.monotonic() - started

        async def later():
            await asyncio.sleep(2 * TIMEOUT)
            await events.append(1, "resp_quiet", 1, [b"second"])

        task = asyncio.create_task(later())
        read = await events.read(1, "resp_quiet", 0, wait=wait)
        await task
        return quiet, waited, read

    quiet, waited, read = asyncio.run(follow())
    assert quiet.events == [] and not quiet.ended and waited >= wait - 0.05
    assert read.events == [(1, b"second")]


def test_the_usage_writer_blocks_on_the_stream_past_the_read_timeout(own_redis, settings):
    settings.SWITCHYARD_USAGE_STREAM = "switchyard:usage:timeouts"
    client = usage.redis_client(block_ms=int(3 * TIMEOUT * 1000))
    started = time.monotonic()
    assert usage.drain_redis(client, consumer="w", block_ms=int(3 * TIMEOUT * 1000)) == 0
    assert time.monotonic() - started >= 3 * TIMEOUT - 0.05
