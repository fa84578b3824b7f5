"""The one ``REDIS_URL`` and the clients that read it.

Operators give a single URL; the application's own clients (redis-py, sync
and asyncio), Django's cache and Celery's broker each spell the same server
differently. The forms accepted:

* ``redis://[[user]:password@]host[:port][/db]``: plain TCP;
* ``rediss://...``: TLS; the server's certificate is verified unless the URL
  says otherwise (``?ssl_cert_reqs=none``), for Celery too (whose own default
  for ``rediss`` is not to verify);
* ``unix://[[user]:password@]/path/to/redis.sock[?db=N]``: a local socket;
* ``redis+sentinel://[[user]:password@]host1:26379,host2:26379/service[/db]``:
  Redis Sentinel, asked for the current master of ``service``; the password
  is the master's (``?sentinel_password=...`` for sentinels that need one of
  their own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit, urlunsplit

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    """A ``redis+sentinel://`` URL, taken apart."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None
    sentinel_password: str | None


def parse_sentinel(url: str) -> SentinelUrl | None:
    """The parts of a Sentinel URL, ``None`` for any other form."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        return None
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    sentinels = tuple(_host_port(host) for host in hosts.split(",") if host)
    path = [p for p in parts.path.split("/") if p]
    if not sentinels or not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError(
            "A Sentinel REDIS_URL reads redis+sentinel://[:password@]host:26379[,host2:26379]"
            "/service[/db]"
        )
    query = parse_qs(parts.query)
    return SentinelUrl(
        sentinels=sentinels,
        service=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_password=(query.get("sentinel_password") or [""])[0] or None,
    )


def _host_port(hostport: str) -> tuple[str, int]:
    if hostport.startswith("["):  # [::1]:26379
        host, _, rest = hostport[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    return host, int(port or SENTINEL_PORT)


def sync_client(url: str, **options: Any) -> Any:
    """A ``redis.Redis`` for any accepted form (``options``: socket timeouts...)."""
    import redis

    sentinel = parse_sentinel(url)
    if sentinel is None:
        return redis.Redis.from_url(url, **options)
    from redis.sentinel import Sentinel

    manager = Sentinel(
        list(sentinel.sentinels), sentinel_kwargs=_sentinel_kwargs(sentinel, options), **options
    )
    return manager.master_for(sentinel.service, **_master_kwargs(sentinel))


def async_client(url: str, **options: Any) -> Any:
    """A ``redis.asyncio.Redis`` for any accepted form. A plain server gets
    a blocking pool of ``max_connections`` (requests wait for a connection
    rather than fail); through Sentinel, the pool is Sentinel's own, unbounded."""
    import redis.asyncio

    sentinel = parse_sentinel(url)
    if sentinel is None:
        pool = redis.asyncio.BlockingConnectionPool.from_url(url, **options)
        return redis.asyncio.Redis(connection_pool=pool)
    from redis.asyncio.sentinel import Sentinel

    # Sentinel's pool does not block: past its limit it would fail requests,
    # so it has none (and no wait for a free connection).
    options.pop("timeout", None)
    options.pop("max_connections", None)
    manager = Sentinel(
        list(sentinel.sentinels), sentinel_kwargs=_sentinel_kwargs(sentinel, options), **options
    )
    return manager.master_for(sentinel.service, **_master_kwargs(sentinel))


def _sentinel_kwargs(sentinel: SentinelUrl, options: dict[str, Any]) -> dict[str, Any]:
    kwargs = {k: v for k, v in options.items() if k.startswith("socket_")}
    if sentinel.sentinel_password:
        kwargs["password"] = sentinel.sentinel_password
    return kwargs


def _master_kwargs(sentinel: SentinelUrl) -> dict[str, Any]:
    return {"db": sentinel.db, "username": sentinel.username, "password": sentinel.password}


def celery_broker(url: str) -> tuple[str, dict[str, Any]]:
    """Celery's broker URL and transport options for ``url``."""
    sentinel = parse_sentinel(url)
    if sentinel is not None:
        auth = ""
        if sentinel.password:
            auth = f"{sentinel.username or ''}:{sentinel.password}@"
        broker = ";".join(
            f"sentinel://{auth}{_bracket(host)}:{port}/{sentinel.db}"
            for host, port in sentinel.sentinels
        )
        options: dict[str, Any] = {"master_name": sentinel.service}
        if sentinel.sentinel_password:
            options["sentinel_kwargs"] = {"password": sentinel.sentinel_password}
        return broker, options
    parts = urlsplit(url)
    if parts.scheme == "rediss" and "ssl_cert_reqs" not in parse_qs(parts.query):
        verified = "&".join(q for q in (parts.query, "ssl_cert_reqs=required") if q)
        return urlunsplit(parts._replace(query=verified)), {}
    if parts.scheme == "unix":
        params = parse_qs(parts.query)
        db = (params.pop("db", None) or ["0"])[0]
        rest = urlencode({"virtual_host": db, **{k: v[0] for k, v in params.items()}})
        return f"redis+socket://{parts.netloc}{parts.path}?{rest}", {}
    return url, {}


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def cache_options(url: str) -> dict[str, Any]:
    """The ``OPTIONS`` of Django's Redis cache for ``url``."""
    if parse_sentinel(url) is None:
        return {}
    return {"pool_class": "responses_api.runtime.redis_urls.UrlConnectionPool"}


class UrlConnectionPool:
    """What Django's Redis cache takes as its ``pool_class``: it only calls
    ``from_url``, which here understands the Sentinel form too."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Any:
        sentinel = parse_sentinel(url)
        if sentinel is None:
            import redis

            return redis.ConnectionPool.from_url(url, **options)
        from redis.sentinel import Sentinel, SentinelConnectionPool

        options.pop("parser_class", None)
        manager = Sentinel(list(sentinel.sentinels), sentinel_kwargs=_sentinel_kwargs(sentinel, {}))
        return SentinelConnectionPool(
            sentinel.service, manager, **_master_kwargs(sentinel), **options
        )
