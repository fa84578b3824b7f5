"""The hosted tools the gateway runs, as the tool loop (``pipeline.tool_loop``)
sees them: each kind — MCP servers (``pipeline.mcp_calls``), web search
(``pipeline.web_searches``), file search (``pipeline.file_searches``), and
any kind added later — plugs in through
:class:`HostedKind`:

* what the model is offered in place of the request's tools of that kind
  (:meth:`HostedKind.functions`, and the request tool types it stands for);
* what the response shows before the model is asked (an MCP server's
  listing);
* which of the items the model's calls became are its calls waiting to run,
  and how one runs: the events that end its item, with its result kept for
  the model's next turn (:meth:`HostedKind.results`).

How a call shows while it streams is the kind's item shape
(``translate.hosted_calls``), chosen by the ``ToolRef`` of its functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from responses_api.tools.logs import redact
from responses_api.translate.items import Item
from responses_api.translate.request import HostedTools
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.tool_turns import mcp_error_text
from responses_api.translate.tools import HostedFunction

if TYPE_CHECKING:
    from responses_api.pipeline.exchange import Exchange

Events = list[dict[str, Any]]


class HostedKind(Protocol):
    @property
    def types(self) -> frozenset[str]:
        """The request's tool types this kind runs (``mcp``, ``web_search``, …)."""
        ...

    def functions(self) -> Sequence[HostedFunction]:
        """The functions the model is offered for it."""
        ...

    def opening(self, translator: StreamTranslator) -> Events:
        """The items the response shows before the model is first asked."""
        ...

    def waiting(self, translator: StreamTranslator) -> list[Item]:
        """Its calls the model made, whole, not yet run."""
        ...

    async def run(
        self, exchange: Exchange, translator: StreamTranslator, item: Item, deadline: float
    ) -> Events:
        """Run one call: the events that end its item."""
        ...

    def refuse(self, item: Item, error: str) -> Events:
        """End a call that may not run (the bounds of the response)."""
        ...

    def results(self) -> Mapping[str, str]:
        """What the model reads of the calls run, by item id, where the
        item itself does not hold it."""
        ...

    async def close(self) -> None:
        """Let go of what the kind kept for the response (its sessions);
        called once the response ends, however it ends."""
        ...


@dataclass(frozen=True, slots=True)
class HostedKinds:
    """The hosted kinds one request runs."""

    kinds: tuple[HostedKind, ...]

    def tools(self) -> HostedTools:
        """What the translation offers in place of the request's tools of these kinds."""
        results: dict[str, str] = {}
        for kind in self.kinds:
            results.update(kind.results())
        return HostedTools(
            runs=frozenset().union(*(kind.types for kind in self.kinds)),
            functions=tuple(f for kind in self.kinds for f in kind.functions()),
            results=results,
        )

    def waiting(self, translator: StreamTranslator) -> list[tuple[HostedKind, Item]]:
        """Every kind's waiting calls, in the order the model made them."""
        found = [(kind, item) for kind in self.kinds for item in kind.waiting(translator)]
        return sorted(found, key=lambda pair: pair[1].output_index)

    async def close(self) -> None:
        for kind in self.kinds:
            await kind.close()

    def of(self, cls: type[Any]) -> Any:
        """The kind of this class, if the request runs it."""
        return next((kind for kind in self.kinds if isinstance(kind, cls)), None)


@contextlib.asynccontextmanager
async def hosted_closed(
    hosted: HostedKinds | None, *, on_error: bool = False
) -> AsyncIterator[None]:
    """Close ``hosted`` when the block ends (``on_error``: only when it
    raises, the block's caller keeping them otherwise), cancelled included."""
    try:
        yield
    except BaseException:
        if hosted is not None and on_error:
            await hosted.close()
        raise
    finally:
        if hosted is not None and not on_error:
            await hosted.close()


async def counted(
    exchange: Exchange, item: Item, running: Awaitable[Events], *, secrets: Sequence[str] = ()
) -> Events:
    """Run a call, counting it on the row: one call, whether it failed, its
    time, and for the trace page its kind, server, tool and error, with
    ``secrets`` (what the tool was sent to authenticate) taken out of the
    error: a hostile server may echo them."""
    started = time.perf_counter()
    try:
        events = await running
    except asyncio.CancelledError:
        # The response ended during the call (the client gone, a shutdown):
        # the server was asked all the same, and the row says so.
        done = {**(item.done_item or {}), "status": "failed", "error": "The response ended first."}
        _ran(exchange, item, done, started, secrets)
        raise
    _ran(exchange, item, item.done_item or {}, started, secrets)
    return events


def _ran(
    exchange: Exchange,
    item: Item,
    done: Mapping[str, Any],
    started: float,
    secrets: Sequence[str],
) -> None:
    error = done.get("error")
    if isinstance(error, dict):
        error = mcp_error_text(error)
    call = {
        "type": str(done.get("type", item.kind)).removesuffix("_call"),
        "server": str(done.get("server_label") or ""),
        # An MCP tool's name, or a web search's action (search, open_page, …).
        "name": str(done.get("name") or (done.get("action") or {}).get("type") or ""),
    }
    if isinstance(error, str) and error:
        call["error"] = redact(error, tuple(secrets))
    exchange.tool_ran(
        failed=done.get("status") == "failed", ms=(time.perf_counter() - started) * 1000, call=call
    )


class Searching:
    """What the kinds that search (the web, the organisation's files) share:
    each call is a request of its own, so nothing stays open to close, and
    what the model reads of a call is kept by its item's id. A kind writes
    ``_run``; running it here counts it on the row."""

    __slots__ = ()
    told: dict[str, str]

    async def close(self) -> None:
        pass

    def results(self) -> dict[str, str]:
        return self.told

    async def run(
        self, exchange: Exchange, translator: StreamTranslator, item: Item, deadline: float
    ) -> Events:
        return await counted(exchange, item, self._run(translator, item, deadline))

    async def _run(self, translator: StreamTranslator, item: Item, deadline: float) -> Events:
        raise NotImplementedError
