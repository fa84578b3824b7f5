"""Choosing a backend for a request (docs/operations/routing.md).

Eligible: enabled, not offline, serving the model, below its concurrency
limit. Those are scored (``scoring``): the part of the prompt each is
expected to have in its prefix cache (``prefix_index``), whether it served
the conversation last (``prompt_cache_key``, or else its leading prompt; a
chain keeps its first turn's), and its load; the best with a free slot
wins. A Codex turn-state token (``pipeline/turn_state.py``) puts the
backend it names first.
A backend that just refused a connection is *suspect* for a few seconds and
is passed over unless nothing else is left. When every eligible backend is
full the request waits for a slot, up to ``SWITCHYARD_QUEUE_TIMEOUT`` seconds.

In-flight counts, suspect marks and affinity are shared by all web processes
through Redis when ``REDIS_URL`` is set, else kept in the process (the
embedded default runs one process): ``backends/routing_state.py``.
In Redis a request holds a *lease*: a member of the backend's sorted set
whose score is its expiry, renewed while the request runs
(:class:`responses_api.runtime.redis_conn.LeaseKeeper`); a process that dies without
releasing its leases stops renewing them, and its slots come back after at
most 30 s. The choice and the claim of a slot are one Lua script, so two
processes never both take a backend's last slot. A backend without a limit
whose load no multi-backend model compares is not counted at all
(``BackendEntry.counted``): its requests hold no lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import time
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from pydantic_core import to_json

from responses_api.backends import scoring
from responses_api.backends.prefix_index import PromptBlocks, record_commands
from responses_api.backends.routing_state import (
    LocalState,
    RedisState,
    Terms,
    inflight_key,
    recent_commands,
    signals_commands,
    suspect_key,
)
from responses_api.backends.scoring import Signals
from responses_api.catalogue.catalog import ModelEntry, Route
from responses_api.protocol.errors import ApiError
from responses_api.protocol.items import InputItem, MessageItem
from responses_api.runtime import redis_conn
from responses_api.runtime.metrics import in_flight_add

log = logging.getLogger(__name__)

POLL_MIN, POLL_MAX = 0.05, 0.25
LEADING_ITEMS = 4


@dataclass(slots=True)
class Lease:
    route: Route
    queue_wait_ms: float
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    released: bool = False
    # Nothing to remember: the conversation's remembered backend was chosen,
    # or the model has no other.
    affine: bool = False
    # Why this backend (``scoring``: pinned, affinity, prefix, least-loaded,
    # failover), and the prompt's tokens it is expected to have cached.
    reason: str = scoring.LEAST_LOADED
    prefix_tokens: int = 0


def affinity_key(
    *,
    organisation_id: int,
    model_id: str,
    prompt_cache_key: str | None,
    instructions: str | None,
    input: str | Sequence[InputItem],
) -> str | None:
    """What identifies a conversation: its ``prompt_cache_key``, or else its
    leading prompt (instructions and the input items up to the first user
    message, which stay the same as the conversation grows). A lone string
    input is no conversation."""
    if prompt_cache_key:
        material = b"k\0" + prompt_cache_key.encode()
    elif not isinstance(input, str) and input:
        # The items up to the first user message: system and developer
        # prompts, then what the user opened the conversation with.
        end = next(
            (
                i + 1
                for i, item in enumerate(input[:LEADING_ITEMS])
                if isinstance(item, MessageItem) and item.role == "user"
            ),
            min(len(input), LEADING_ITEMS),
        )
        # Serialised by the items' own (compiled) serialisers, fields in
        # declaration order: the same items always give the same bytes.
        material = b"p\0" + to_json([instructions or "", input[:end]])
    else:
        return None
    digest = hashlib.sha256(f"{organisation_id}\0{model_id}\0".encode() + material)
    return digest.hexdigest()[:32]


def clear_suspect_sync(backend_id: str) -> None:
    """Called by the health check after a success (a sync context)."""
    if redis_conn.enabled():
        client = redis_conn.sync_client()
        try:
            client.delete(suspect_key(backend_id))
        finally:
            client.close()
    else:
        router.local.suspect_until.pop(backend_id, None)


def keep_signals_sync(backend_id: str, signals: Signals | None) -> None:
    """Keep what a health check polled of a backend's load (None: forget it),
    for every process (a sync context)."""
    if redis_conn.enabled():
        client = redis_conn.sync_client()
        try:
            with client.pipeline(transaction=False) as pipe:
                for command in signals_commands(backend_id, signals):
                    pipe.execute_command(*command)
                pipe.execute()
        finally:
            client.close()
    else:
        router.local.signalled(backend_id, signals)


def no_backend(model: ModelEntry, why: str) -> ApiError:
    return ApiError(
        503,
        f"No backend can serve the model '{model.public_id}': {why}. Try again shortly.",
        code="no_backend_available",
        headers=[(b"retry-after", b"10")],
    )


class Router:
    """Leases backend slots for requests; one per process (``router``)."""

    def __init__(self) -> None:
        self.local = LocalState()
        self._redis = RedisState()
        # Per loop, the event that the next release sets (a new one after
        # each release): waiters wake without a lock to take.
        self._freed: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def state(self) -> LocalState | RedisState:
        return self._redis if redis_conn.enabled() else self.local

    def _next_release(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        event = self._freed.get(loop)
        if event is None:
            event = self._freed[loop] = asyncio.Event()
        return event

    def _wake_waiters(self) -> None:
        # Each waiter re-checks its own backends.
        event = self._freed.pop(asyncio.get_running_loop(), None)
        if event is not None:
            event.set()

    def candidates(
        self, model: ModelEntry, *, pinned: str | None, exclude: set[str]
    ) -> list[Route]:
        routes = [r for r in model.routes if r.backend.enabled]
        if pinned is not None:
            # A pinned request never goes anywhere else.
            routes = [r for r in routes if r.backend.id == pinned]
            if not routes:
                raise ApiError(
                    404,
                    f"Backend '{pinned}' (X-Backend-Id) is unknown, disabled or does not "
                    f"serve the model '{model.public_id}'.",
                    code="backend_not_found",
                    param="X-Backend-Id",
                )
            if routes[0].backend.health == "offline":
                raise ApiError(
                    503,
                    f"Backend '{routes[0].backend.name}' (X-Backend-Id) is offline.",
                    code="backend_offline",
                    headers=[(b"retry-after", b"10")],
                )
            return routes
        if not routes:
            raise no_backend(model, "it has no enabled backend")
        online = [r for r in routes if r.backend.health != "offline"]
        if not online:
            names = ", ".join(sorted(r.backend.name for r in routes))
            raise no_backend(model, f"every backend is offline ({names})")
        return [r for r in online if r.backend.id not in exclude]

    async def acquire(
        self,
        model: ModelEntry,
        *,
        pinned: str | None = None,
        affinity: str | None = None,
        exclude: set[str] | None = None,
        prompt: PromptBlocks | None = None,
        turn: str | None = None,
    ) -> Lease:
        """A slot on the best backend, waiting for one while all are full.

        ``turn`` is the backend a turn-state token names: first choice while
        it is a candidate with a free slot. Raises a 503 when no backend is
        eligible or none frees up within ``SWITCHYARD_QUEUE_TIMEOUT``. (A
        stream's keep-alives while it waits are the caller's: they run on a
        timer of their own.)
        """
        routes = self.candidates(model, pinned=pinned, exclude=exclude or set())
        if not routes:
            raise no_backend(model, "every backend failed for this request")
        fixed = scoring.PINNED if pinned else scoring.FAILOVER if exclude else None
        if len(routes) == 1 and not routes[0].backend.counted:
            # Unlimited, and no other backend's load is compared with its:
            # a count nobody reads is not kept (a round trip in production).
            in_flight_add(backend=routes[0].backend.name, delta=1)
            reason = fixed or scoring.LEAST_LOADED
            return Lease(routes[0], queue_wait_ms=0.0, id="", affine=True, reason=reason)
        state = self.state
        ranking = None
        # A model on one backend has nowhere else to send a conversation:
        # nothing to look up, nothing to remember (a Redis round trip in
        # production, for every turn of a stored chain).
        only = len(model.routes) == 1
        if len(routes) > 1 and not only:
            observed = await state.observe(routes, affinity, prompt)
            if any(r.backend.kv_events_endpoint for r in routes):
                # Tokenizing a long prompt takes milliseconds: off the loop.
                # The tokenizer and the event subscriber load with the first precise backend.
                from responses_api.backends.prompt_tokens import held_by

                precise = await asyncio.to_thread(held_by, routes, prompt)
                observed = dataclasses.replace(observed, precise=precise)
            total = len(prompt.hashes) if prompt is not None else 0
            ranking = scoring.rank(routes, observed, total_blocks=total)
        held = next((i for i, r in enumerate(routes) if turn and r.backend.id == turn), None)
        if held is not None and ranking is not None:
            ranking = ranking.first(held)
        terms = Terms(ranking.bonus, ranking.per_request) if ranking is not None else None
        lease_id = uuid.uuid4().hex
        started = time.monotonic()
        deadline = started + settings.SWITCHYARD_QUEUE_TIMEOUT
        poll = POLL_MIN
        task = asyncio.current_task()
        while (index := await state.claim(routes, terms, lease_id)) is None:
            if task is not None and task.cancelling():
                # A cancellation (client gone) that a wait in this loop
                # absorbed must still end the wait.
                raise asyncio.CancelledError
            now = time.monotonic()
            if now >= deadline:
                raise ApiError(
                    503,
                    f"Every backend serving '{model.public_id}' is at its concurrency limit "
                    f"and none freed up within {settings.SWITCHYARD_QUEUE_TIMEOUT:g} s.",
                    code="backends_saturated",
                    headers=[(b"retry-after", b"5")],
                )
            # A release in this process wakes the waiters at once; releases in
            # other processes are seen by polling.
            timeout = min(poll, max(deadline - now, 0.0))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._next_release().wait(), timeout=timeout)
            poll = min(poll * 2, POLL_MAX)
        if fixed is None:
            fixed = scoring.PINNED if index == held else None
        lease = Lease(
            routes[index],
            queue_wait_ms=(time.monotonic() - started) * 1000,
            id=lease_id,
            affine=only or (ranking is not None and index == ranking.holder),
            reason=fixed or (scoring.reason(ranking, index) if ranking else scoring.LEAST_LOADED),
            prefix_tokens=ranking.tokens[index] if ranking else 0,
        )
        in_flight_add(backend=routes[index].backend.name, delta=1)
        if task is not None and task.cancelling():
            await self.release(lease)
            raise asyncio.CancelledError
        return lease

    def placed(self, lease: Lease, prompt: PromptBlocks | None) -> redis_conn.Release | None:
        """Record that the lease's backend was sent ``prompt`` (a scored
        request: its prefix, and one more placed there lately): at once in the
        process, or as commands for the round trip of the request's usage row."""
        if prompt is None:
            return None
        backend_id = lease.route.backend.id
        if not redis_conn.enabled():
            self.local.placed(prompt, backend_id)
            return None
        now = time.time()
        commands = record_commands(prompt, backend_id, now)
        return redis_conn.Release([*commands, *recent_commands(backend_id, lease.id, now)])

    async def release(self, lease: Lease) -> None:
        if self.release_nowait(lease):
            return
        lease.released = True
        in_flight_add(backend=lease.route.backend.name, delta=-1)
        try:
            await self.state.release(lease.route.backend.id, lease.id)
        finally:
            self._wake_waiters()

    def release_nowait(self, lease: Lease) -> bool:
        """Release without awaiting when nothing needs to (a lease already
        released, or the process's own counts); False when ``release`` must
        be awaited (Redis)."""
        if lease.released:
            return True
        if not lease.route.backend.counted:
            lease.released = True
            in_flight_add(backend=lease.route.backend.name, delta=-1)
            return True
        if redis_conn.enabled():
            return False
        lease.released = True
        in_flight_add(backend=lease.route.backend.name, delta=-1)
        self.local.release_now(lease.route.backend.id)
        self._wake_waiters()
        return True

    def release_later(self, lease: Lease) -> redis_conn.Release | None:
        """Release as commands for a round trip the request makes anyway
        (its usage row's), or None when it was released now (already, or
        the process's own counts). The lease stops being renewed at once:
        if the commands never go, it expires."""
        if self.release_nowait(lease):
            return None
        lease.released = True
        in_flight_add(backend=lease.route.backend.name, delta=-1)
        key = inflight_key(lease.route.backend.id)
        redis_conn.leases.drop(key, lease.id)
        return redis_conn.Release([("ZREM", key, lease.id)], [self._wake_waiters])

    async def mark_suspect(self, backend_id: str) -> None:
        await self.state.mark_suspect(backend_id)

    async def remember(self, affinity: str | None, backend_id: str) -> None:
        if affinity:
            await self.state.remember(affinity, backend_id)


router = Router()
