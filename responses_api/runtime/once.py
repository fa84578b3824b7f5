"""Once per period, however many schedulers ask: the guard that lets two
Celery beats run side by side (``config.celery.OncePerPeriodScheduler``).

Each scheduled entry is claimed before it is sent: with Redis, by ``SET key
owner NX PX ttl`` on the shared server; without, in this process (the
embedded default runs one process, and no beat). The claim lasts 90 % of the
period, so it has expired when the same beat's next turn comes, while a
second beat, whose turns fall anywhere in between, finds it taken. The
period's work is sent once; if the beat holding the turns dies, the other
one's next turn after the claim expired takes over.
"""

from __future__ import annotations

import threading
import time
import uuid

from django.conf import settings

PREFIX = "switchyard:once:"
# The share of the period a claim lasts.
HOLD = 0.9

_owner = uuid.uuid4().hex
_local: dict[str, float] = {}
_local_lock = threading.Lock()


def claim(name: str, period: float) -> bool:
    """True for the first caller of ``name`` in the period; False for the rest."""
    ttl_ms = max(1, int(period * HOLD * 1000))
    if settings.REDIS_URL:
        from responses_api.runtime.redis_conn import sync_client

        return bool(sync_client().set(PREFIX + name, _owner, nx=True, px=ttl_ms))
    now = time.monotonic()
    with _local_lock:
        if _local.get(name, 0.0) > now:
            return False
        _local[name] = now + ttl_ms / 1000
        return True
