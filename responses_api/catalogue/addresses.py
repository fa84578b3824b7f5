"""Which network addresses a backend may have: the gateway is no proxy into
the network it runs in.

An organisation admin names a backend by URL; without a policy that URL
could be Redis on loopback, a database on the private network or the
cloud's metadata service, and Switchyard would carry requests there. Two
tiers of addresses are refused:

* **private**: loopback (127.0.0.0/8, ::1), private (10/8, 172.16/12,
  192.168/16, fc00::/7), shared CGNAT (100.64/10), unspecified (0.0.0.0,
  ::), multicast and reserved ranges. The platform setting
  ``SWITCHYARD_BACKEND_ALLOW_PRIVATE`` opens them (on in the embedded
  default, whose simulator and local model servers are on loopback) and so
  does a backend's own ``allow_private`` flag, which only platform staff
  set.
* **link-local**: 169.254.0.0/16, fe80::/10 and the cloud metadata
  addresses and names (169.254.169.254, fd00:ec2::254, 100.100.100.200,
  metadata.google.internal). Only a backend's ``allow_private`` flag opens
  them: the metadata service hands out the machine's credentials, and no
  platform-wide switch should put it in every organisation's reach.

An IPv6 address that carries an IPv4 one (``::ffff:a.b.c.d``, 6to4,
NAT64's 64:ff9b::/96) is judged by the IPv4 address.

The same rules apply when a backend is saved (``base_url_error``, which the backend services call,
resolving the name once) and at every new connection
(:class:`PolicyResolver`), so a name that later resolves elsewhere (DNS
rebinding) is refused too.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from functools import cache
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog"})
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Opened only by the backend's own flag, never by the platform setting.
_LINK_LOCAL_TIER = frozenset({"cloud metadata", "link-local"})


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Which tiers of non-public addresses a backend may use."""

    private: bool
    link_local: bool

    def refusal(self, address: str) -> str | None:
        """What ``address`` (an IP literal) is, when this policy refuses it."""
        kind = address_kind(address)
        if kind is None:
            return None
        if kind in _LINK_LOCAL_TIER:
            return None if self.link_local else kind
        return None if self.private else kind

    def refuses_name(self, host: str) -> bool:
        return not self.link_local and host.lower().rstrip(".") in METADATA_NAMES

    @property
    def opens_all(self) -> bool:
        return self.private and self.link_local


@cache
def _policy(private: bool, link_local: bool) -> AddressPolicy:
    return AddressPolicy(private=private, link_local=link_local)


def backend_policy(*, allow_private: bool) -> AddressPolicy:
    """The policy for a backend whose own ``allow_private`` flag is given;
    the platform setting is read now (never at import)."""
    return _policy(allow_private or settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE, allow_private)


def address_kind(address: str) -> str | None:
    """What kind of non-public address this IP literal is; None when public
    (or not an IP literal at all)."""
    try:
        ip: IPAddress = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in METADATA_ADDRESSES:
            return "cloud metadata"
        carried = ip.ipv4_mapped or ip.sixtofour
        if carried is None and ip in _NAT64:
            carried = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if carried is not None:
            ip = carried
    if ip in METADATA_ADDRESSES:
        return "cloud metadata"
    if ip.is_link_local:
        return "link-local"
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "shared (carrier-grade NAT)"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "reserved"
    return None


def refused_message(host: str, kind: str, *, resolved: bool, subject: str = "backend") -> str:
    """The one wording of a refusal, at save time and at connect time. A
    resolved name's addresses are not named: the organisation admin who
    reads it may not learn the inside of the platform's network.
    ``subject`` names what has the address (a backend, an MCP server)."""
    article = "an" if kind[0] in "aeiou" else "a"
    verb = "resolves to" if resolved else "is"
    return f"The {subject}'s address {host} is not allowed: it {verb} {article} {kind} address."


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now (blocking); none when it does
    not resolve. Tests replace this: no test may query a DNS server."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def save_refusal(host: str, port: int, policy: AddressPolicy) -> str | None:
    """Why a backend at ``host`` may not be saved under ``policy``, or None.
    A name that does not resolve yet is accepted: the connection is checked
    again when it is made."""
    if policy.refuses_name(host):
        return refused_message(host, "cloud metadata", resolved=False)
    if _is_ip(host):
        kind = policy.refusal(host)
        return refused_message(host, kind, resolved=False) if kind else None
    if policy.opens_all:
        return None  # nothing to look up
    for address in resolve(host, port):
        kind = policy.refusal(address)
        if kind:
            return refused_message(host, kind, resolved=True)
    return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class AddressRefused(OSError):
    """A backend's address is refused by its policy; nothing was sent.

    An ``OSError`` so that aiohttp treats it as a failed name resolution
    (its ``ClientConnectorError.os_error``)."""


class PolicyResolver(AbstractResolver):
    """aiohttp's own resolver, with the addresses the policy refuses taken
    out of every answer; an answer left empty is :class:`AddressRefused`.

    Called only when a new connection needs an address (kept-alive
    connections are reused, and the connector caches answers for
    ``ttl_dns_cache``), so it costs nothing per request. aiohttp does not
    resolve IP literals: ``literal_refusal`` covers those.
    """

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._resolver = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if self._policy.refuses_name(host):
            raise AddressRefused(refused_message(host, "cloud metadata", resolved=False))
        found = await self._resolver.resolve(host, port, family)
        allowed = [r for r in found if self._policy.refusal(r["host"]) is None]
        if not allowed:
            kind = next((k for r in found if (k := self._policy.refusal(r["host"]))), "refused")
            raise AddressRefused(refused_message(host, kind, resolved=True))
        return allowed

    async def close(self) -> None:
        await self._resolver.close()


def literal_refusal(host: str | None, policy: AddressPolicy) -> str | None:
    """Why a URL whose host is an IP literal may not be connected to."""
    if not host:
        return None
    kind = policy.refusal(host)
    return refused_message(host, kind, resolved=False) if kind else None


def base_url_error(url: str, *, allow_private: bool | None) -> str | None:
    """Why ``url`` cannot be a backend's base URL, or None. With
    ``allow_private`` None the address is not looked up; else it is judged
    by the address policy of a backend with that flag.
    """
    # Not Django's URLValidator: it refuses single-label hosts such as
    # ``http://vllm:8000/v1``, the usual name of a backend inside a cluster.
    if not url.startswith(("http://", "https://")):
        return "Use an http:// or https:// URL."
    if len(url) > 500:
        return "At most 500 characters."
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "Enter a valid URL."
    if not parts.hostname or any(c.isspace() for c in url):
        return "Enter a valid URL."
    # A query or fragment would follow every path the gateway appends
    # (``/chat/completions?…``) and let the URL reach any path of the host.
    if "?" in url or "#" in url:
        return "A base URL has no query (?…) or fragment (#…)."
    if "@" in parts.netloc:
        return "A base URL has no user name or password; give the upstream API key instead."
    if _numeric_host(parts.hostname):
        return "Write an IPv4 address as four decimal numbers (a.b.c.d)."
    if allow_private is None:
        return None
    default_port = 443 if parts.scheme == "https" else 80
    refusal = save_refusal(
        parts.hostname, port or default_port, backend_policy(allow_private=allow_private)
    )
    if refusal:
        return f"{refusal} Only platform staff may allow a backend on such an address."
    return None


def _numeric_host(host: str) -> bool:
    """A host in one of the old numeric IPv4 forms (``2130706433``,
    ``127.1``, ``0x7f.0.0.1``) that resolvers accept but aiohttp refuses."""
    if ":" in host or not all(c in "0123456789abcdefx." for c in host):
        return False
    parts = host.split(".")
    canonical = len(parts) == 4 and all(p.isdigit() and str(int(p)) == p for p in parts)
    return not canonical and any(c.isdigit() for c in parts[-1][:1])
