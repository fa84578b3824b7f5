"""What a background response's create request hands its worker (:class:`Job`),
and what stands in for the client's connection while the worker runs it
(:class:`LogResponder`): see ``background.run``."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from asgiref.sync import sync_to_async

from responses_api.access.auth import Caller
from responses_api.pipeline.call import RESPONSES, Call
from responses_api.pipeline.exchange import Client, Exchange, Timing
from responses_api.pipeline.responder import Responder
from responses_api.pipeline.writers import LogWriter
from responses_api.runtime import telemetry
from responses_api.store import events
from responses_api.store.background import background_update

# The create request wrote events 0 and 1 (response.created, response.queued).
FIRST_WORKER_EVENT = 2


def job_dump(call: Call, snapshot: dict[str, Any]) -> bytes:
    exchange = call.exchange
    caller = exchange.caller
    assert caller is not None
    fields = {name: getattr(caller, name) for name in Caller.__dataclass_fields__}
    fields["allowed_models"] = sorted(caller.allowed_models)
    pinned = call.headers.get(b"x-backend-id")
    job: dict[str, Any] = {
        "caller": fields,
        "request_id": exchange.request_id,
        "created_at": exchange.timing.created_at,
        "client": list(exchange.client),
        "pinned": pinned.decode("latin-1") if pinned else None,
        "body": call.body.decode(),
        "snapshot": snapshot,
    }
    # The request's span, the run's parent (W3C headers); none untraced.
    if trace := telemetry.carrier():
        job["trace"] = trace
    return orjson.dumps(job, default=str)


@dataclass(slots=True)
class Job:
    caller: Caller
    request_id: str
    created_at: float
    client: Client
    pinned: str | None
    body: bytes
    snapshot: dict[str, Any]
    trace: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, data: bytes) -> Job:
        job = orjson.loads(data)
        fields = job["caller"]
        for name in ("monthly_budget", "org_monthly_budget"):
            if fields.get(name) is not None:
                fields[name] = Decimal(fields[name])
        if fields.get("expires_at") is not None:
            fields["expires_at"] = datetime.fromisoformat(fields["expires_at"])
        fields["allowed_models"] = frozenset(fields["allowed_models"])
        return cls(
            caller=Caller(**fields),
            request_id=job["request_id"],
            created_at=job["created_at"],
            client=Client(*job["client"]),
            pinned=job["pinned"],
            body=job["body"].encode(),
            snapshot=job["snapshot"],
            trace=job.get("trace") or {},
        )

    @property
    def key(self) -> tuple[int, str]:
        """The response's organisation and id."""
        return self.caller.organisation_id, self.snapshot["id"]

    def exchange(self, holds: Callable[[], Awaitable[bool]] | None = None) -> Exchange:
        """The create request's exchange, again: its row is this one's;
        with ``holds``, handed over only while that says the run holds the
        response (:class:`Fenced`)."""
        exchange = Fenced(
            holds=holds,
            request_id=self.request_id,
            endpoint=RESPONSES,
            method="POST",
            client=self.client,
            timing=Timing(created_at=self.created_at),
        )
        # The create request counted under the requests-per-minute limits;
        # the run counts its tokens, its concurrency and its spend.
        exchange.authenticated(dataclasses.replace(self.caller, rpm=None, org_rpm=None))
        return exchange


@dataclass(slots=True)
class Fenced(Exchange):
    """An exchange whose row a worker that lost the response does not hand
    over: the reaper wrote the row (``worker_lost``) when it took it."""

    holds: Callable[[], Awaitable[bool]] | None = None

    async def submit(self) -> None:
        if not self.submitted and self.holds is not None and not await self.holds():
            self.submitted = True
            await self.give_back_held()
            return
        await Exchange.submit(self)


# --- the client's connection, for a worker -------------------------------------------


class LogResponder(Responder):
    """Stands in for the client's connection while a worker runs a background
    response: the events the handler writes are numbered and kept by its
    writer as they are made (``writers.LogWriter``, after the two the create
    request wrote), and appended to the response's event log at each write;
    a JSON answer (an error before the stream started) is kept aside for the
    run to end the response with. Its appends carry the run's fencing token:
    once one is refused (the run was reaped), it writes nothing more and
    ``lost`` tells the run to stop."""

    __slots__ = (
        "answer",
        "ended",
        "fence",
        "log",
        "lost",
        "organisation_id",
        "response_id",
        "shown",
    )

    def __init__(
        self, exchange: Exchange, organisation_id: int, response_id: str, fence: int | None
    ) -> None:
        super().__init__(_unsent, exchange)
        self.organisation_id = organisation_id
        self.response_id = response_id
        self.fence = fence
        self.log = LogWriter(FIRST_WORKER_EVENT)
        self.lost = False
        self.ended = False
        self.shown = False  # the stored response shows the run in progress
        self.answer = b""

    def writer(self) -> LogWriter:
        return self.log

    async def json(
        self, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        self.started = self.finished = True
        self.answer = body

    async def start_stream(self) -> None:
        self.started = True

    async def chunk(self, data: bytes) -> None:
        await self._append(end=False)

    async def end_stream(self, data: bytes) -> None:
        self.finished = True
        await self._append(end=True)

    async def _append(self, *, end: bool) -> None:
        kept = self.log.take()
        if self.lost:
            return
        if not self.shown and self.log.last:
            self.shown = True
            await sync_to_async(background_update)(
                organisation_id=self.organisation_id,
                response_id=self.response_id,
                response=self.log.last,
                fence=self.fence,
            )
        first = self.log.sequence - len(kept)
        if not await events.append(
            self.organisation_id, self.response_id, first, kept, end=end, fence=self.fence
        ):
            self.lost = True
            return
        self.ended = self.ended or end


async def _unsent(message: Any) -> None:
    raise AssertionError("a background run has no connection to send to")
