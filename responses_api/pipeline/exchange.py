"""What is known about one API request, and the usage row it becomes.

A leaf of the request path: it imports nothing that handles the request
(no consumer, relay, failover or routing). Every layer records what it
learns through an :class:`Exchange` method, so the row's fields have one
owner; :func:`responses_api.pipeline.ending.end_exchange` submits the row once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from responses_api.pipeline.client import CLIENT_ID_LENGTH, NO_CLIENT, Client
from responses_api.pipeline.facts import (
    NO_TOOLS,
    NOT_ASKED,
    UNENDED,
    UNPLACED,
    Asked,
    Outcome,
    Placement,
    Timing,
    ToolUse,
)
from responses_api.runtime import redis_conn
from responses_api.runtime.metrics import request_observe
from responses_api.usage.columns import LOG_FIELDS
from responses_api.usage.holds import spend_release, spend_settle
from responses_api.usage.sink import sink

if TYPE_CHECKING:
    from responses_api.access.auth import Caller
    from responses_api.catalogue.catalog import BackendEntry, ModelEntry
    from responses_api.protocol.errors import ApiError
    from responses_api.translate.request import ChatDraft
    from responses_api.translate.token_usage import Usage
    from responses_api.usage.spend import SpendPlan

log = logging.getLogger("switchyard.requests")

CLIENT_GONE = "Client disconnected"
SHUT_DOWN = "Server shut down"


# The ids of the keys ``model_check`` creates for itself while it runs in this
# process: their rows are marked as checks. No client can put a key here.
check_keys: set[str] = set()


def new_request_id() -> str:
    return str(uuid.uuid4())


def prompt_tokens(draft: ChatDraft) -> int:
    """About how many tokens a translated prompt is: four characters of its
    JSON (messages and tools) per token, the estimate the model limits
    already use (``translate.request``). Worked out only when needed (a
    spend hold, a cancelled request's row): it encodes the whole prompt."""
    body = draft.body
    # An embeddings request (``backends.embeddings``) has inputs, not messages.
    size = len(orjson.dumps(body.get("messages") or body.get("input") or ()))
    if body.get("tools"):
        size += len(orjson.dumps(body["tools"]))
    return max(size // 4, 1)


ZERO = Decimal(0)


@dataclass(slots=True)
class Exchange:
    """One request from its first byte to its usage row.

    Its facts are recorded by the methods below, named for what happened,
    each called where that becomes known; the layers only read them."""

    request_id: str
    endpoint: str
    method: str = "POST"
    client: Client = NO_CLIENT
    timing: Timing = field(default_factory=Timing)
    caller: Caller | None = None
    # What was asked for.
    asking: Asked = NOT_ASKED
    model_entry: ModelEntry | None = None
    # Where it ran, and what it produced there.
    placement: Placement = UNPLACED
    tools: ToolUse = NO_TOOLS
    tokens: tuple[int, int, int, int] = (0, 0, 0, 0)  # input, cached, output, reasoning
    # The request as translated for the backends: what its prompt is.
    draft: ChatDraft | None = None
    outcome: Outcome = UNENDED
    notices: list[dict[str, str]] = field(default_factory=list)
    # x-ratelimit-* headers for every response of a rate-limited caller.
    limit_headers: Sequence[tuple[bytes, bytes]] = ()
    # The monthly spend limits the request was admitted under, if any, and
    # what it holds under them until its row settles.
    spend: SpendPlan | None = None
    # Set by draining when the process's shutdown deadline ends this
    # exchange: its cancellation then ends it as a 503, not a 499.
    shutdown: bool = False
    submitted: bool = False
    # What the request holds in Redis (its backend slot, its rate-limit
    # leases), given back in the round trip that hands its row over.
    releases: list[redis_conn.Release] | None = None

    # --- what the layers record -------------------------------------------

    def authenticated(self, caller: Caller) -> None:
        self.caller = caller

    def asked(self, *, model: str, stream: bool, prompt_cache_key: str | None) -> None:
        """The request's body was read. Without a session header, its
        ``prompt_cache_key`` (Codex sends its session id there too) names
        the session."""
        self.asking = self.asking._replace(model=model, stream=stream)
        if not self.client.session_id and prompt_cache_key:
            self.client = self.client._replace(
                session_id=prompt_cache_key.strip()[:CLIENT_ID_LENGTH]
            )

    def responding(self, response_id: str, *, background: bool) -> None:
        """The id of the response the request makes (its row names it, and
        the trace page links its polls by it)."""
        self.asking = self.asking._replace(response_id=response_id, background=background)

    def served_by(self, model: ModelEntry) -> None:
        """The catalogue entry that prices the request."""
        self.model_entry = model

    def translated(self, draft: ChatDraft) -> None:
        """The request was translated for the backends: its prompt, whose
        estimate its spend hold and, when the backend never reports usage,
        its row count."""
        self.draft = draft

    def reserved(self, spend: SpendPlan) -> None:
        """Its spend hold was taken: the row gives it back, whatever the ending."""
        self.spend = spend

    def admitted(self, *, limit_headers: Sequence[tuple[bytes, bytes]]) -> None:
        """Admitted under the caller's limits: the rate-limit headers every
        response carries."""
        self.limit_headers = limit_headers

    def notice(self, code: str, message: str) -> None:
        if not any(n["code"] == code for n in self.notices):
            self.notices.append({"code": code, "message": message})

    def waited(self, ms: float) -> None:
        timing = self.timing
        timing.queue_wait_ms = (timing.queue_wait_ms or 0.0) + ms

    def tool_ran(self, *, failed: bool, ms: float, call: dict[str, Any] | None = None) -> None:
        """A hosted tool's call ended (``pipeline.hosted.counted``); ``call``
        says which, for the trace page."""
        self.tools = self.tools.ran(call or {}, failed=failed, ms=ms)

    def attempt(self, backend: BackendEntry, reason: str, prefix_tokens: int) -> None:
        """A try on ``backend`` starts (failover may make several), chosen
        for ``reason`` and expected to reuse ``prefix_tokens`` cached tokens."""
        attempts = self.placement.attempts + 1
        self.placement = self.placement._replace(
            backend=backend, attempts=attempts, reason=reason, prefix_tokens=prefix_tokens
        )

    def turn_held(self, token: str) -> None:
        """The Codex turn-state token the responses carry."""
        self.placement = self.placement._replace(turn_state=token)

    def produced(self, usage: Usage, first_token_at: float | None) -> None:
        """The relay ended: what the backend produced, and when its first token came."""
        self.tokens = (
            usage.input_tokens,
            usage.cached_tokens,
            usage.output_tokens,
            usage.reasoning_tokens,
        )
        timing = self.timing
        if first_token_at is not None and timing.ttft_ms is None:
            timing.ttft_ms = (first_token_at - timing.started) * 1000

    def answered(self, status: int) -> None:
        ended = self.outcome
        self.outcome = Outcome(status, ended.error_code, ended.error_message, ended.note)

    def fail(self, error: ApiError, cause: str = "") -> None:
        """Ended by ``error``. ``cause``, an unexpected failure the client
        sees only as a generic error, is what the row says instead."""
        if cause:
            message = cause[:2000]
        else:
            message = f"{error.message} {error.detail}" if error.detail else error.message
        self.outcome = Outcome(error.status, error.code or error.type, message, self.outcome.note)

    def client_gone(self, note: str = CLIENT_GONE) -> None:
        """A 499: the client left, or cancelled its run (whose note, said first, stays)."""
        if self.outcome.status != 499:
            self.outcome = Outcome(499, "client_disconnected", self.outcome.error_message, note)

    def row_left_to_worker(self) -> None:
        """A background response's worker writes this request's row."""
        self.submitted = True

    def shutdown_deadline(self) -> None:
        """The process's shutdown deadline passed with the request in flight."""
        self.shutdown = True

    def cut_by_shutdown(self) -> None:
        """The shutdown deadline cancelled the request: its row says so."""
        self.outcome = self.outcome._replace(note=SHUT_DOWN)

    # --- what is reported -------------------------------------------------

    @property
    def backend(self) -> BackendEntry | None:
        return self.placement.backend

    @property
    def attempts(self) -> int:
        return self.placement.attempts

    @property
    def input_tokens(self) -> int:
        return self.tokens[0]

    def counted(self) -> tuple[tuple[int, int, int, int], bool]:
        """The tokens the row counts, and whether its input is estimated: a
        request the client cancelled once a backend had its prompt, before
        that backend reported usage, counts the prompt's estimate."""
        tokens = self.tokens
        if tokens[0] or self.draft is None or self.backend is None or self.outcome.status != 499:
            return tokens, False
        return (prompt_tokens(self.draft), *tokens[1:]), True

    @property
    def output_tokens(self) -> int:
        return self.tokens[2]

    def cost(self) -> Decimal:
        """What the request cost at its model's prices, in their currency."""
        entry = self.model_entry
        if entry is None:
            return ZERO
        (input_tokens, cached, output, _), _ = self.counted()
        return entry.cost(input_tokens, cached, output)

    def duration_ms(self) -> float:
        return (time.perf_counter() - self.timing.started) * 1000

    def tokens_per_second(self, duration_ms: float) -> float | None:
        output = self.tokens[2]
        if not output:
            return None
        generation = duration_ms - (self.timing.ttft_ms or 0.0)
        return output / (generation / 1000) if generation > 0 else None

    def extras(self) -> dict[str, Any]:
        """The response body's ``switchyard`` object (docs/api/index.md)."""
        duration = self.duration_ms()
        backend = self.backend
        timing = self.timing
        return {
            "request_id": self.request_id,
            "backend": {"id": backend.id, "name": backend.name, "version": backend.version}
            if backend is not None
            else None,
            "timing": {
                "queue_wait_ms": _round(timing.queue_wait_ms),
                "ttft_ms": _round(timing.ttft_ms),
                "duration_ms": _round(duration),
                "tokens_per_second": _round(self.tokens_per_second(duration)),
            },
            "notices": self.notices,
            "cost": float(self.cost()),
        }

    def row(self) -> dict[str, Any]:
        caller = self.caller
        assert caller is not None
        duration = self.duration_ms()
        (input_tokens, cached, output, reasoning), estimated = self.counted()
        backend, timing, outcome, client = self.backend, self.timing, self.outcome, self.client
        return {
            "request_id": self.request_id,
            "organisation_id": caller.organisation_id,
            "api_key_id": caller.key_id or None,  # none: the organisation's own work
            "key_prefix": caller.prefix,
            "model": self.asking.model[:200],
            "backend_id": backend.id if backend is not None else None,
            "backend_name": backend.name if backend is not None else "",
            "endpoint": self.endpoint,
            "method": self.method,
            "stream": self.asking.stream,
            "response_id": self.asking.response_id,
            "background": self.asking.background,
            "status": outcome.status,
            "error_code": outcome.error_code,
            "error_message": outcome.error_message,
            "note": outcome.note,
            "notices": [n["code"] for n in self.notices],
            "input_tokens": input_tokens,
            "input_tokens_estimated": estimated,
            "cached_tokens": cached,
            "output_tokens": output,
            "reasoning_tokens": reasoning,
            "cost": self.cost(),
            "attempts": self.attempts,
            "route_reason": self.placement.reason,
            "prefix_reused_tokens": self.placement.prefix_tokens,
            "tool_calls": self.tools.calls,
            "tool_errors": self.tools.errors,
            "tool_ms": round(self.tools.ms, 3),
            "tool_log": list(self.tools.log),
            "queue_wait_ms": timing.queue_wait_ms,
            "ttft_ms": timing.ttft_ms,
            "duration_ms": duration,
            "tokens_per_second": self.tokens_per_second(duration),
            "client_ip": client.ip,
            "user_agent": client.user_agent,
            "session_id": client.session_id,
            "thread_id": client.thread_id,
            "client_request_id": client.request_id,
            "originator": client.originator,
            "is_check": caller.key_id in check_keys,
            "created_at": timing.created_at,
            "finished_at": time.time(),
        }

    async def give_back(self, release: redis_conn.Release) -> None:
        """Give ``release`` back with the row, one round trip for both; at
        once when the row is gone already or there will be none."""
        if self.submitted or self.caller is None:
            await asyncio.shield(redis_conn.run_releases([release]))
        elif self.releases is None:
            self.releases = [release]
        else:
            self.releases.append(release)

    async def give_back_held(self) -> None:
        """What a request that ended without its row still holds, on its
        own round trip (the row's ending failed before handing it over)."""
        releases, self.releases = self.releases, None
        if releases:
            await asyncio.shield(redis_conn.run_releases(releases))

    async def drop_hold(self) -> None:
        """A spend hold no row settled, given back: every ending's last step."""
        spend, self.spend = self.spend, None
        await spend_release(spend)

    async def submit(self) -> None:
        """Hand the row over (once; none for an unauthenticated request)."""
        if self.submitted or self.caller is None:
            return
        self.submitted = True
        row = self.row()
        # The month's spend counters take the row's cost and tokens, and
        # give its hold back, in the round trip that hands the row over.
        settle = spend_settle(self.spend, row) if self.spend is not None else []
        releases = self.releases
        if releases is not None:
            self.releases = None
            # Shielded: a disconnect arriving now must not cut the row off half-sent.
            await asyncio.shield(_hand_over(row, settle, releases))
        else:
            appending = sink.submit(row, scripts=settle) if settle else sink.submit(row)
            if appending is not None:
                await asyncio.shield(appending)
        self.spend = None  # else kept for ``drop_hold``: a second give-back is a no-op
        request_observe(row=row)
        log.info("request", extra={"switchyard": {k: row[k] for k in LOG_FIELDS}})


async def _hand_over(
    row: dict[str, Any],
    scripts: list[redis_conn.ScriptCall],
    releases: list[redis_conn.Release],
) -> None:
    then = [command for release in releases for command in release.commands]
    try:
        appending = sink.submit(row, scripts=scripts, then=then)
        if appending is not None:
            await appending
    finally:
        # Waiters for a released slot look again only once it is free.
        redis_conn.released(releases)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
