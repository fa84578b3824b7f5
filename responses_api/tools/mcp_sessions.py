"""The MCP sessions of one response: one per server, opened at its listing
and kept for every call of the tool loop, so that a loop of five calls pays
one connection and one ``initialize`` handshake, not six.

A session is held by a task of its own (the SDK's session is a context whose
task group must end in the task that began it, and the listing runs on a
task per server), which opens it, hands it over and waits until the response
ends. Calls use it from the response's task, one at a time.

Bounded like a session of one call (``tools.mcp``): every list and call has
its own timeout, byte limit and cancel scope (``Guard.begin``); the address
policy is checked at every connection the session makes; the client's
secrets are hidden from the logs of the session's task too. A list or call
that fails or is cut short (its timeout, its byte limit, the caller
cancelled) leaves its session broken: that session is closed at once, and
the next call opens a new one. :meth:`Sessions.aclose` closes them all when
the response ends, however it ends; nothing of an organisation's session
outlives its response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
from mcp.client.session import ClientSession

from responses_api.tools.connection import Guard
from responses_api.tools.logs import hiding
from responses_api.tools.mcp import McpServer, open_session, server_guard

logger = logging.getLogger(__name__)

# How long a session may take to close (the Streamable HTTP ``DELETE``)
# before its task is cancelled.
CLOSE_SECONDS = 2.0

Key = tuple[str, str, str, tuple[tuple[str, str], ...]]


class Kept:
    """One server's session and the task that holds it open."""

    __slots__ = ("broken", "guard", "lock", "ready", "stop", "task")

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.lock = asyncio.Lock()
        self.stop = asyncio.Event()
        self.ready: asyncio.Future[ClientSession] | None = None
        self.task: asyncio.Task[None] | None = None
        self.broken = False


class Sessions:
    """The sessions of one response. ``lifetime``: the longest it may keep
    one (the transport's own timeouts; each use is bounded by the caller)."""

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self._kept: dict[Key, Kept] = {}
        self._closing: list[asyncio.Task[None]] = []
        self.closed = False
        # Sessions opened, for the tests and the logs.
        self.opened = 0

    def guard(self, server: McpServer, limit: int, scope: anyio.CancelScope) -> Guard:
        """The guard of ``server``'s session (a new one when it has none or
        its last was broken), begun for one use."""
        key = _key(server)
        kept = self._kept.get(key)
        if kept is not None and (kept.broken or (kept.task is not None and kept.task.done())):
            self._drop(key)
            kept = None
        if kept is None:
            kept = self._kept[key] = Kept(server_guard(server, limit))
        kept.guard.begin(limit, scope)
        return kept.guard

    @contextlib.asynccontextmanager
    async def session(self, server: McpServer) -> AsyncIterator[ClientSession]:
        """``server``'s session, for one use; its guard (:meth:`guard`) first."""
        if self.closed:
            raise RuntimeError("The response's MCP sessions are closed.")
        key = _key(server)
        kept = self._kept[key]
        async with kept.lock:
            try:
                if kept.ready is None:
                    self._start(server, kept)
                assert kept.ready is not None
                # Shielded: a caller cut short leaves the future to the task.
                session = await asyncio.shield(kept.ready)
                yield session
            except BaseException:
                kept.broken = True
                if self._kept.get(key) is kept:
                    self._drop(key)
                raise

    def _start(self, server: McpServer, kept: Kept) -> None:
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        # Retrieved here when no caller is left to: no "never retrieved" warning.
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        kept.ready = ready
        kept.task = asyncio.create_task(self._hold(server, kept))
        self.opened += 1

    async def _hold(self, server: McpServer, kept: Kept) -> None:
        assert kept.ready is not None
        ready = kept.ready
        with hiding(server.secrets()):
            try:
                async with open_session(server, kept.guard, self.lifetime) as session:
                    ready.set_result(session)
                    await kept.stop.wait()
            except Exception as exc:
                kept.broken = True
                if not ready.done():
                    ready.set_exception(exc)
                else:
                    logger.info("MCP server %s: its session ended: %s", server.label, type(exc))
            finally:
                if not ready.done():
                    ready.cancel()

    def _drop(self, key: Key) -> None:
        """Cut a broken session: its task is cancelled (its connections
        closed); :meth:`aclose` waits for it."""
        kept = self._kept.pop(key)
        if kept.task is not None:
            kept.task.cancel()
            self._closing.append(kept.task)

    async def aclose(self) -> None:
        """Close every session: each ends its own (a Streamable HTTP session
        says so to its server), cut after ``CLOSE_SECONDS``."""
        self.closed = True
        kept, self._kept = list(self._kept.values()), {}
        tasks = [k.task for k in kept if k.task is not None]
        for each in kept:
            each.stop.set()
        tasks += self._closing
        self._closing = []
        if not tasks:
            return
        try:
            await asyncio.wait(tasks, timeout=CLOSE_SECONDS)
        finally:
            left = [task for task in tasks if not task.done()]
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=CLOSE_SECONDS)


def _key(server: McpServer) -> Key:
    return (
        server.label,
        server.url,
        server.authorization or "",
        tuple(sorted(server.headers.items())),
    )
