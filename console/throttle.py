"""The sign-in throttle: failed attempts counted per account and per client
address in Django's cache (Redis in production, so every web process sees the
same counts; process-local in embedded mode, which has one process).

A window opens at the first failure and lasts
``SWITCHYARD_LOGIN_WINDOW_SECONDS``; once an account or an address reaches its
limit within it, every attempt is refused, the right password included, until
the window ends."""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import cache


def _counters(*, username: str, ip: str | None) -> list[tuple[str, int]]:
    counters = []
    name = username.strip().lower()
    if name:
        digest = hashlib.sha256(name.encode()).hexdigest()
        counters.append(
            (f"login-failures:account:{digest}", settings.SWITCHYARD_LOGIN_ACCOUNT_LIMIT)
        )
    if ip:
        counters.append((f"login-failures:ip:{ip}", settings.SWITCHYARD_LOGIN_IP_LIMIT))
    return counters


def login_lockout(*, username: str, ip: str | None) -> datetime | None:
    """When sign-in may be tried again, or None if it may be tried now."""
    window = settings.SWITCHYARD_LOGIN_WINDOW_SECONDS
    retry_at = None
    for key, limit in _counters(username=username, ip=ip):
        values = cache.get_many([f"{key}:count", f"{key}:start"])
        if values.get(f"{key}:count", 0) < limit:
            continue
        start = values.get(f"{key}:start", time.time())
        ends = datetime.fromtimestamp(start, tz=UTC) + timedelta(seconds=window)
        retry_at = ends if retry_at is None else max(retry_at, ends)
    return retry_at


def login_failure_record(*, username: str, ip: str | None) -> None:
    """Count a failed sign-in against the account and the address."""
    window = settings.SWITCHYARD_LOGIN_WINDOW_SECONDS
    for key, _limit in _counters(username=username, ip=ip):
        # add() only sets a missing key: the window starts at the first failure.
        cache.add(f"{key}:start", time.time(), window)
        cache.add(f"{key}:count", 0, window)
        try:
            cache.incr(f"{key}:count")
        except ValueError:  # expired between add() and incr()
            cache.set(f"{key}:count", 1, window)


def login_success_record(*, username: str) -> None:
    """A successful sign-in clears the account's failures (not the address's)."""
    for key, _limit in _counters(username=username, ip=None):
        cache.delete_many([f"{key}:count", f"{key}:start"])


def login_throttle_forget(*, username: str = "", ip: str | None = None) -> None:
    """Drop the counts of an account and/or an address (an admin's unlock)."""
    for key, _limit in _counters(username=username, ip=ip):
        cache.delete_many([f"{key}:count", f"{key}:start"])
