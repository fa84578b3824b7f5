"""Every accepted ``REDIS_URL`` form reaches the same Redis through each
client that reads it: the application's (redis-py, sync and asyncio),
Django's cache and Celery's broker (kombu). The servers are real: a
redis-server of the test's own, on a TCP port and a Unix socket, and a
Sentinel (``redis-server --sentinel``) watching it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import kombu
import pytest
import redis
from django.core.cache.backends.redis import RedisCache

from responses_api.runtime.redis_urls import (
    SentinelUrl,
    async_client,
    cache_options,
    celery_broker,
    parse_sentinel,
    sync_client,
)
from tests.ops.outages import PASSWORD, RedisServer, redis_server, sentinel

# --------------------------------------------------------------------------- parsing


def test_sentinel_urls_are_taken_apart():
    assert parse_sentinel("redis+sentinel://:s3cret@h1:26379,h2:26380,h3/mymaster/2") == (
        SentinelUrl(
            sentinels=(("h1", 26379), ("h2", 26380), ("h3", 26379)),
            service="mymaster",
            db=2,
            username=None,
            password="s3cret",
            sentinel_password=None,
        )
    )
    parsed = parse_sentinel("redis+sentinel://app:pw@[::1]:26379/cache?sentinel_password=sp")
    assert parsed is not None
    assert parsed.sentinels == (("::1", 26379),) and parsed.db == 0
    assert (parsed.username, parsed.password, parsed.sentinel_password) == ("app", "pw", "sp")
    for other in ("redis://h:6379/0", "rediss://h:6380/0", "unix:///run/redis.sock"):
        assert parse_sentinel(other) is None
    for broken in (
        "redis+sentinel://h1:26379",
        "redis+sentinel:///mymaster",
        "redis+sentinel://h/m/x",
    ):
        with pytest.raises(ValueError, match="redis\\+sentinel://"):
            parse_sentinel(broken)


@pytest.mark.parametrize(
    ("url", "broker", "options"),
    [
        ("redis://:pw@h:6379/1", "redis://:pw@h:6379/1", {}),
        # kombu would not verify a rediss:// server's certificate unless told to.
        ("rediss://:pw@h:6380/1", "rediss://:pw@h:6380/1?ssl_cert_reqs=required", {}),
        ("rediss://h:6380/1?ssl_cert_reqs=none", "rediss://h:6380/1?ssl_cert_reqs=none", {}),
        ("unix:///run/redis.sock?db=3", "redis+socket:///run/redis.sock?virtual_host=3", {}),
        (
            "redis+sentinel://:pw@h1:26379,h2:26380/mymaster/2",
            "sentinel://:pw@h1:26379/2;sentinel://:pw@h2:26380/2",
            {"master_name": "mymaster"},
        ),
        (
            "redis+sentinel://h1/mymaster?sentinel_password=sp",
            "sentinel://h1:26379/0",
            {"master_name": "mymaster", "sentinel_kwargs": {"password": "sp"}},
        ),
    ],
)
def test_celery_broker_spelling(url, broker, options):
    assert celery_broker(url) == (broker, options)


def test_kombu_reads_the_mapped_urls_as_meant():
    tls = kombu.Connection(celery_broker("rediss://:pw@h:6380/1")[0])
    assert tls.transport_cls == "rediss" and tls.ssl["ssl_cert_reqs"].name == "CERT_REQUIRED"
    url, options = celery_broker("redis+sentinel://:pw@h1:26379,h2:26380/mymaster/2")
    sentinels = kombu.Connection(url, transport_options=options)
    assert sentinels.transport_cls == "sentinel" and sentinels.password == "pw"
    assert sentinels.alt == ["sentinel://:pw@h1:26379/2", "sentinel://:pw@h2:26380/2"]


def test_only_sentinel_urls_change_the_cache_pool():
    assert cache_options("redis://h:6379/0") == {}
    assert cache_options("unix:///run/redis.sock") == {}
    assert cache_options("redis+sentinel://h/mymaster")["pool_class"].endswith("UrlConnectionPool")


# --------------------------------------------------------------------------- real servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[tuple[RedisServer, int]]:
    directory = tmp_path_factory.mktemp("redis")
    with redis_server(directory, tls=True) as server, sentinel(directory, server) as port:
        yield server, port


def _forms(server: RedisServer, sentinel_port: int) -> dict[str, str]:
    return {
        "redis": server.url(3),
        "rediss": f"rediss://:{PASSWORD}@127.0.0.1:{server.tls_port}/3?ssl_ca_certs={server.ca_path}",
        "unix": f"unix://:{PASSWORD}@{server.socket_path}?db=3",
        "sentinel": f"redis+sentinel://:{PASSWORD}@127.0.0.1:{sentinel_port}/mymaster/3",
    }


def test_a_tls_server_is_verified(servers):
    """Without the CA that signed the server's certificate, no client connects:
    neither the app's nor Celery's (whose default for rediss:// would be not
    to verify, were the URL not given ``ssl_cert_reqs=required``)."""
    server, _ = servers
    unverifiable = f"rediss://:{PASSWORD}@127.0.0.1:{server.tls_port}/3"
    with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED|certificate"):
        sync_client(unverifiable, socket_timeout=5).ping()
    broker, options = celery_broker(unverifiable)
    with (
        kombu.Connection(broker, transport_options=options, connect_timeout=5) as conn,
        pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED|certificate"),
    ):
        conn.ensure_connection(max_retries=1)


@pytest.mark.parametrize("form", ["redis", "rediss", "unix", "sentinel"])
def test_every_client_reaches_the_same_database(servers, form):
    server, sentinel_port = servers
    url = _forms(server, sentinel_port)[form]
    direct = redis.Redis.from_url(server.url(3))
    mark = uuid.uuid4().hex

    client = sync_client(url, socket_timeout=5)
    client.set(f"sync:{mark}", form)
    assert direct.get(f"sync:{mark}") == form.encode()

    async def through_asyncio() -> bytes | None:
        aclient = async_client(url, max_connections=10, timeout=5)
        try:
            await aclient.set(f"async:{mark}", form)
            return await aclient.get(f"sync:{mark}")
        finally:
            await aclient.aclose()

    assert asyncio.run(through_asyncio()) == form.encode()
    assert direct.get(f"async:{mark}") == form.encode()

    cache = RedisCache(url, {"OPTIONS": cache_options(url), "KEY_PREFIX": mark})
    cache.set("k", {"form": form}, 30)
    assert cache.get("k") == {"form": form}
    assert any(mark in key.decode() for key in direct.keys(f"*{mark}*"))

    broker, options = celery_broker(url)
    queue_name = f"q-{mark}"
    with kombu.Connection(broker, transport_options=options, connect_timeout=5) as conn:
        queue = conn.SimpleQueue(queue_name)
        queue.put({"form": form})
        message = queue.get(timeout=5)
        assert message.payload == {"form": form}
        message.ack()
        queue.close()
    # kombu kept its queue in database 3 of this server.
    assert direct.exists(f"_kombu.binding.{queue_name}")
