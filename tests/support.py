"""Helpers for tests that wait on something outside the test: poll a
condition against a deadline rather than sleep for a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition a test waited for did not come true in time."""


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy
    value, and return that value; raise ``WaitTimeout`` naming ``message``
    (a string, or a callable giving one, for state read at the time) once
    ``timeout`` seconds have passed. An exception from ``predicate`` stops
    the wait at once (a server that died will not come up)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise WaitTimeout(f"{text} within {timeout} s")
        time.sleep(interval)
