"""When each dependency's current outage began, in this process.

``/readyz`` (``responses_api/views.py``) stays ready through an outage
shorter than ``SWITCHYARD_READY_GRACE_SECONDS``: a Redis failover or a
database restart reaches every pod at the same moment, and taking them all
out of the load balancer together would turn a blip that the requests ride
out (or fail one by one) into a full outage. Past the window the process
cannot do its job, and says so.

The window counts from the first failed use of the dependency, by a request
as much as by a probe: a kubelet probing every ten seconds would otherwise
add up to that much to an outage the requests had been failing in all along.
"""

from __future__ import annotations

import time

from django.conf import settings

REDIS = "redis"
DATABASE = "database"
# Longer than a kubelet's probe period (10 s by default) and a hanging
# probe's own timeout: within an outage something fails more often.
QUIET = 60.0


class Outages:
    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self.last: dict[str, float] = {}

    def failed(self, name: str, now: float | None = None) -> float:
        """Record that ``name`` failed at ``now``; for how long it has been
        failing. Failures further apart than :data:`QUIET` (or the grace
        window, if longer) are two outages: with nothing failing in between,
        not even the probes, it had come back unseen."""
        now = time.monotonic() if now is None else now
        last = self.last.get(name)
        quiet = max(QUIET, settings.SWITCHYARD_READY_GRACE_SECONDS)
        stale = last is not None and now - last > quiet
        if name not in self.since or stale:
            self.since[name] = now
        self.last[name] = now
        return now - self.since[name]

    def recovered(self, name: str) -> None:
        self.since.pop(name, None)
        self.last.pop(name, None)


outages = Outages()


def failure_seen(exc: BaseException) -> None:
    """Count ``exc`` as the start of an outage when it says a dependency is
    out of reach (any other error is not an outage)."""
    import redis.exceptions
    from django import db

    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        outages.failed(REDIS)
    elif isinstance(exc, db.OperationalError | db.InterfaceError):
        outages.failed(DATABASE)
