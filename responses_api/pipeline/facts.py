"""The facts an :class:`~responses_api.pipeline.exchange.Exchange` records
that are more than one value: when things happened, how the request ended,
and where it ran. Changed by its exchange only."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from responses_api.catalogue.catalog import BackendEntry


@dataclass(slots=True)
class Timing:
    """When the request started, by both clocks, and how long it waited for
    a backend slot and for its first token. Changed by its exchange only."""

    started: float = field(default_factory=time.perf_counter)
    created_at: float = field(default_factory=time.time)
    queue_wait_ms: float | None = None
    ttft_ms: float | None = None


class Asked(NamedTuple):
    """What the request asked for: its model, whether it streams, and the
    response it makes: that response's id, and whether it runs in the
    background (whose worker writes this request's row)."""

    model: str = ""
    stream: bool = False
    response_id: str = ""
    background: bool = False


NOT_ASKED = Asked()


class Outcome(NamedTuple):
    """How the request ended: its status, and the error and note its row
    keeps (nothing but a status for a success)."""

    status: int = 0
    error_code: str = ""
    error_message: str = ""
    note: str = ""


UNENDED = Outcome()


class Placement(NamedTuple):
    """Where the request ran: the backend of its last try, how many tries,
    why that backend was chosen (``backends.scoring``), the prompt's tokens
    it was expected to have cached, and the Codex turn-state token its
    responses carry (``pipeline.turn_state``)."""

    backend: BackendEntry | None = None
    attempts: int = 0
    reason: str = ""
    prefix_tokens: int = 0
    turn_state: str = ""


UNPLACED = Placement()


class ToolUse(NamedTuple):
    """The hosted tools a request ran (``pipeline.tool_loop``): its calls,
    those that failed, the time spent in them, and the first
    ``TOOL_LOG_MAX`` calls one by one for the trace page (no arguments nor
    output: what a tool was given and gave is the client's content)."""

    calls: int = 0
    errors: int = 0
    ms: float = 0.0
    log: tuple[dict[str, Any], ...] = ()

    def ran(self, call: dict[str, Any], *, failed: bool, ms: float) -> ToolUse:
        """With one more call ended, logged while the log has room."""
        logged = {**call, "ms": round(ms, 3), "status": "failed" if failed else "completed"}
        if not failed:
            logged.pop("error", None)
        elif isinstance(error := logged.get("error"), str):
            logged["error"] = error[:TOOL_ERROR_CHARS]
        log = self.log if len(self.log) >= TOOL_LOG_MAX else (*self.log, logged)
        return ToolUse(self.calls + 1, self.errors + failed, self.ms + ms, log)


TOOL_LOG_MAX = 50
# What of a failed call's error the trace keeps.
TOOL_ERROR_CHARS = 300


NO_TOOLS = ToolUse()
