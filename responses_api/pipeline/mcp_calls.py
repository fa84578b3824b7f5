"""The MCP servers of one request and the calls the loop runs on them
(``pipeline.tool_loop``), approved calls included.

A tool whose calls need the client's approval is offered like any other;
its call ends the response as an ``mcp_approval_request`` whose id is a MAC
over the organisation and the call (``store.seal.approval_id``). The next
request answers it with an ``mcp_approval_response`` and sends the request
item back (by ``previous_response_id``, or in its input where nothing is
stored): the call runs only if the id proves this server asked exactly that
call of this organisation, and only once (:func:`approvals_checked`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from django.conf import settings

from responses_api.catalogue.mcp_resolve import ResolvedMcpServer
from responses_api.pipeline.hosted import counted
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import invalid
from responses_api.protocol.items import (
    McpApprovalRequestItem,
    McpApprovalResponseItem,
    McpCallItem,
)
from responses_api.runtime import once
from responses_api.store.seal import approval_sealed
from responses_api.translate.items import Item
from responses_api.translate.stream import StreamTranslator
from responses_api.translate.tool_turns import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    REQUEST_TIMEOUT,
    ListedTool,
    approved_call,
    execution_error,
    http_error,
    list_tools,
    mcp_result,
    protocol_error,
    waiting_calls,
)
from responses_api.translate.tools import HostedFunction, ToolRef

if TYPE_CHECKING:
    from responses_api.pipeline.exchange import Exchange
    from responses_api.tools.mcp import McpServer
    from responses_api.tools.mcp_sessions import Sessions

# How long an approval's id is remembered as used: longer than any chain
# that could carry it back.
APPROVAL_MEMORY_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True, slots=True)
class Offer:
    """One MCP server of the request: where it is, and the tools it offers."""

    server: ResolvedMcpServer
    tools: tuple[ListedTool, ...]

    def client(self) -> McpServer:
        from responses_api.tools.mcp import McpServer

        server = self.server
        return McpServer(
            label=server.label,
            url=server.server_url,
            transport=server.transport,  # type: ignore[arg-type]
            headers=dict(server.headers),
            authorization=server.authorization or None,
            policy=server.policy,
        )


@dataclass(frozen=True, slots=True)
class Hosted:
    """The request's MCP servers, listed: the hosted kind ``mcp``
    (``pipeline.hosted.HostedKind``). ``sessions``: one per server, open
    from the listing until :meth:`close`."""

    offers: tuple[Offer, ...]
    sessions: Sessions | None = None
    types: frozenset[str] = frozenset({"mcp"})

    def functions(self) -> list[HostedFunction]:
        """What the model is offered: each server's tools, named for it."""
        return [
            HostedFunction(
                ToolRef(
                    kind="mcp",
                    name=tool.name,
                    namespace=offer.server.label,
                    approval=tool.needs_approval,
                ),
                tool.description,
                tool.input_schema,
            )
            for offer in self.offers
            for tool in offer.tools
        ]

    def offer(self, label: str | None) -> Offer | None:
        return next((o for o in self.offers if o.server.label == label), None)

    def opening(self, translator: StreamTranslator) -> list[dict[str, Any]]:
        """Each server's ``mcp_list_tools`` item."""
        events: list[dict[str, Any]] = []
        for offer in self.offers:
            events += list_tools(translator, offer.server.label, offer.tools)
        return events

    def waiting(self, translator: StreamTranslator) -> list[Item]:
        return waiting_calls(translator)

    async def run(
        self, exchange: Exchange, translator: StreamTranslator, item: Item, deadline: float
    ) -> list[dict[str, Any]]:
        return await run_call(exchange, self, item, deadline)

    def refuse(self, item: Item, error: str) -> list[dict[str, Any]]:
        # The loop's own refusals (max_tool_calls, the last turn): the call
        # was never sent, like a server that could not be reached.
        return mcp_result(item, error=protocol_error(CONNECTION_CLOSED, error))

    def results(self) -> dict[str, str]:
        return {}  # an mcp_call item holds its output

    async def close(self) -> None:
        if self.sessions is not None:
            await self.sessions.aclose()


async def run_call(
    exchange: Exchange, hosted: Hosted, item: Item, deadline: float
) -> list[dict[str, Any]]:
    """Run one call the model made; its result, as the events that end it.
    The exchange counts the call, whether it failed and its time (the row's)."""
    offer = hosted.offer(item.done_item["server_label"]) if item.done_item else None
    # The credentials the server is sent, kept out of the trace's error.
    secrets = offer.client().secrets() if offer is not None else []
    return await counted(exchange, item, _called(hosted, item, deadline), secrets=secrets)


async def _called(hosted: Hosted, item: Item, deadline: float) -> list[dict[str, Any]]:
    assert item.done_item is not None
    offer = hosted.offer(item.done_item["server_label"])
    name = item.done_item["name"]
    if offer is None or not any(tool.name == name for tool in offer.tools):
        return _refused(item, INVALID_PARAMS, f"The tool '{name}' is not offered by this server.")
    try:
        arguments = orjson.loads(item.done_item["arguments"] or "{}")
    except orjson.JSONDecodeError:
        return _refused(item, INVALID_PARAMS, "The call's arguments are not valid JSON.")
    if not isinstance(arguments, dict):
        return _refused(item, INVALID_PARAMS, "The call's arguments must be a JSON object.")
    from responses_api.tools.mcp import call_tool

    left = deadline - time.monotonic()
    if left <= 0:
        return _refused(item, REQUEST_TIMEOUT, "The response's time for tool calls is over.")
    outcome = await call_tool(
        offer.client(),
        name,
        arguments,
        timeout=min(settings.SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS, left),
        max_output_bytes=settings.SWITCHYARD_MCP_OUTPUT_BYTES,
        sessions=hosted.sessions,
    )
    if outcome.error is not None:
        if outcome.kind == "http" and outcome.code is not None:
            return mcp_result(item, error=http_error(outcome.code, outcome.error))
        code = CONNECTION_CLOSED if outcome.code is None else outcome.code
        return _refused(item, code, outcome.error)
    if outcome.is_error:
        text = outcome.output or "The tool reported an error."
        return mcp_result(item, error=execution_error(text))
    return mcp_result(item, output=outcome.output)


def _refused(item: Item, code: int, message: str) -> list[dict[str, Any]]:
    return mcp_result(item, error=protocol_error(code, message))


Answer = tuple[McpApprovalRequestItem, McpApprovalResponseItem]


async def approvals_checked(
    exchange: Exchange, hosted: Hosted, request: CreateResponse
) -> list[Answer]:
    """The request's ``mcp_approval_response`` items not answered yet, each
    with the request it answers, claimed: checked before the response
    starts, so that an answer to a request this server did not make, or one
    answered already, is a 400 naming it (not a stream that fails)."""
    if isinstance(request.input, str):
        return []
    assert exchange.caller is not None
    organisation_id = exchange.caller.organisation_id
    asked = {item.id: item for item in request.input if isinstance(item, McpApprovalRequestItem)}
    ran = {
        item.approval_request_id
        for item in request.input
        if isinstance(item, McpCallItem) and item.approval_request_id
    }
    checked: list[Answer] = []
    for answer in request.input:
        if not isinstance(answer, McpApprovalResponseItem) or answer.approval_request_id in ran:
            continue
        # The input as continued (a stored chain before the client's own
        # items): an index would not be the client's, the id is.
        param = "input"
        quoted = f"'{answer.approval_request_id[:128]}'"
        request_item = asked.get(answer.approval_request_id)
        if request_item is None or not approval_sealed(
            organisation_id,
            request_item.id,
            request_item.server_label,
            request_item.name,
            request_item.arguments,
        ):
            raise invalid(
                f"The approval of approval_request_id {quoted} answers no approval request "
                "of this server: send the mcp_approval_request item back with it, as it "
                "was received.",
                param=param,
            )
        if hosted.offer(request_item.server_label) is None:
            raise invalid(
                f"The approved call is on the MCP server '{request_item.server_label}', which "
                "is not among this request's tools.",
                param=param,
            )
        fresh = await asyncio.to_thread(
            once.claim, f"mcp-approval:{request_item.id}", APPROVAL_MEMORY_SECONDS
        )
        if not fresh:
            raise invalid(f"The approval request {quoted} was answered already.", param=param)
        checked.append((request_item, answer))
    return checked


async def answered_approvals(
    exchange: Exchange,
    hosted: Hosted,
    checked: list[Answer],
    translator: StreamTranslator,
    deadline: float,
) -> list[dict[str, Any]]:
    """Run the calls the ``checked`` answers approve (and tell the model of
    those they deny), each as an ``mcp_call`` of this response; the events
    that show them."""
    events: list[dict[str, Any]] = []
    for request_item, answer in checked:
        item, shown = approved_call(
            translator,
            request_item.server_label,
            request_item.name,
            request_item.arguments,
            request_item.id,
        )
        events += shown
        if answer.approve:
            events += await run_call(exchange, hosted, item, deadline)
        else:
            # Not sent to the server: a protocol error of the gateway's own,
            # whose message the model reads.
            reason = f": {answer.reason}" if answer.reason else "."
            events += _refused(item, CONNECTION_CLOSED, f"The call was not approved{reason}")
    return events


def tool_needs_approval(server: ResolvedMcpServer, tool: ListedTool) -> ListedTool:
    return ListedTool(
        tool.name,
        tool.description,
        tool.input_schema,
        tool.read_only,
        needs_approval=server.needs_approval(tool.name),
    )
