"""The tool loop: the MCP tools a request offers, run by the gateway.

Two stages of ``create_response`` (docs/api/mcp-tools.md):

* :func:`hosted_tools`, before the request is translated: each
  ``{"type": "mcp"}`` tool is resolved to a server (the organisation's
  registered one wins; ``catalogue.mcp_resolve``) and its tools are listed,
  all servers at once, so that the translation offers the allowed ones to
  the model as functions. A server that cannot list its tools fails the
  request (424), as a backend that cannot answer does.
* :func:`answer_with_tools`, in place of one relay: the backend answers;
  the MCP calls it made are run (each bounded in time and output), their
  results go to the client as ``mcp_call`` items and back to the model, and
  the backend is asked again, until it answers without calling one of them,
  or the response's bounds end the loop: ``max_tool_calls``, the turns and
  the deadline of the settings.

A tool's output is untrusted input: the client (``tools.mcp``) caps it and
never raises for what a server does, so a hostile server fails its call,
not the response. Every backend call of the loop goes through failover
like the first, and their usage adds up in the one row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from django.conf import settings
from pydantic import TypeAdapter

from responses_api.access.auth import Caller
from responses_api.catalogue.catalog import mcp_organisation_for
from responses_api.catalogue.mcp_resolve import ResolvedMcpServer, resolve_mcp_tool
from responses_api.pipeline.call import Call, Output
from responses_api.pipeline.failover import Attempt
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError, invalid
from responses_api.protocol.items import InputItem
from responses_api.protocol.tools import HostedTool
from responses_api.translate.items import Item
from responses_api.translate.request import ChatDraft

if TYPE_CHECKING:
    from responses_api.tools.mcp import McpServer

from responses_api.translate.tool_turns import (
    ListedTool,
    mcp_result,
    next_call,
    waiting_calls,
)

if TYPE_CHECKING:
    from responses_api.tools.mcp import McpServer

from responses_api.translate.tool_turns import (
    list_tools as list_tools_item,
)

Upstream = AbstractAsyncContextManager[Attempt]


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
    """The request's MCP servers, listed."""

    offers: tuple[Offer, ...]

    def mcp_tools(self) -> list[tuple[str, ListedTool]]:
        """What the translation offers the model: each server's tools."""
        return [(offer.server.label, tool) for offer in self.offers for tool in offer.tools]

    def offer(self, label: str | None) -> Offer | None:
        return next((o for o in self.offers if o.server.label == label), None)


async def hosted_tools(caller: Caller, request: CreateResponse) -> Hosted | None:
    """Resolve and list the request's MCP servers (None when it has none)."""
    wanted = [
        (index, tool.model_dump())
        for index, tool in enumerate(request.tools or ())
        if isinstance(tool, HostedTool) and tool.type == "mcp"
    ]
    if not wanted:
        return None
    organisation = await mcp_organisation_for(caller.organisation_id)
    servers: list[ResolvedMcpServer] = []
    for index, tool in wanted:
        label = tool.get("server_label")
        if isinstance(label, str) and label not in organisation.servers:
            organisation = await mcp_organisation_for(caller.organisation_id, missing=label)
        resolved = resolve_mcp_tool(organisation, tool, index=index)
        if isinstance(resolved, ApiError):
            raise resolved
        if any(server.label == resolved.label for server in servers):
            raise invalid(
                f"Two MCP tools name the server '{resolved.label}': give each server once.",
                param=f"tools[{index}].server_label",
            )
        servers.append(resolved)
    for server in servers:
        if server.require_approval != "never" or server.approval_exceptions:
            raise invalid(
                f"The MCP server '{server.label}' asks for approval of tool calls, which this "
                "server does not run yet: set require_approval to 'never' (in the request, or "
                "for a registered server, in its settings).",
                param="tools",
                code="unsupported_parameter",
            )
    listed = await asyncio.gather(*(_listed(server) for server in servers))
    return Hosted(
        tuple(Offer(server, tools) for server, tools in zip(servers, listed, strict=True))
    )


async def _listed(server: ResolvedMcpServer) -> tuple[ListedTool, ...]:
    # The MCP SDK costs half a second to import: only a request that offers
    # an MCP tool pays it, once per process.
    from responses_api.tools.mcp import McpUnavailable, list_tools

    offer = Offer(server, ())
    try:
        tools = await list_tools(
            offer.client(), timeout=settings.SWITCHYARD_MCP_LIST_TIMEOUT_SECONDS
        )
    except McpUnavailable as error:
        raise ApiError(
            424,
            f"Error retrieving tool list from MCP server '{server.label}': {error.message}",
            type="external_connector_error",
            code="http_error",
            param="tools",
        ) from None
    return tuple(
        ListedTool(tool.name, tool.description, tool.input_schema, tool.read_only)
        for tool in tools
        if server.allows(tool.name, read_only_hint=tool.read_only)
    )


Relay = Callable[[Upstream], Awaitable[None]]
Open = Callable[[ChatDraft], Upstream]
Draft = Callable[[CreateResponse], ChatDraft]


async def answer_with_tools(
    call: Call,
    output: Output,
    hosted: Hosted,
    request: CreateResponse,
    *,
    draft: ChatDraft,
    open_upstream: Open,
    relay: Relay,
    translate: Draft,
) -> None:
    """Relay the backend's answers and run the MCP calls they make, until
    one answers without such a call (see the module's docstring)."""
    translator = output.translator
    if output.writer is not None and not call.responder.started:
        # Started before the first item, which its snapshot must not hold yet.
        await call.responder.start_stream()
        await call.responder.chunk(output.writer.encode(translator.start()))
    for offer in hosted.offers:
        await _write(call, output, list_tools_item(translator, offer.server.label, offer.tools))
    deadline = time.monotonic() + settings.SWITCHYARD_MCP_DEADLINE_SECONDS
    budget = request.max_tool_calls
    made = 0
    for turn in range(settings.SWITCHYARD_MCP_MAX_TURNS):
        await relay(open_upstream(draft))
        if translator.finish_reason == "length" or translator.output_cap.reached:
            return  # cut short: the ending says incomplete
        await _write(call, output, translator.close_items())
        waiting = waiting_calls(translator)
        if not waiting or turn + 1 == settings.SWITCHYARD_MCP_MAX_TURNS:
            # A call left waiting at the last turn ends with the response:
            # ``calling`` becomes ``incomplete`` (``StreamTranslator.close_items``).
            for item in waiting:
                await _write(call, output, mcp_result(item, error=_LAST_TURN))
            return
        events = []
        for item in waiting:
            if budget is not None and made >= budget:
                events += mcp_result(item, error=f"max_tool_calls ({budget}) was reached.")
                continue
            made += 1
            events += await _run(hosted, item, deadline)
        await _write(call, output, events)
        next_call(translator)
        draft = translate(_continued(request, translator.output()))


_LAST_TURN = "The response made as many backend calls as it may (SWITCHYARD_MCP_MAX_TURNS)."


async def _run(hosted: Hosted, item: Item, deadline: float) -> list[dict[str, Any]]:
    """Run one call the model made; its result, as the events that end it."""
    assert item.ref is not None and item.done_item is not None
    offer = hosted.offer(item.ref.namespace)
    name = item.ref.name
    if offer is None or not any(tool.name == name for tool in offer.tools):
        return mcp_result(item, error=f"The tool '{name}' is not offered by this server.")
    try:
        arguments = orjson.loads(item.done_item["arguments"] or "{}")
    except orjson.JSONDecodeError:
        return mcp_result(item, error="The call's arguments are not valid JSON.")
    if not isinstance(arguments, dict):
        return mcp_result(item, error="The call's arguments must be a JSON object.")
    from responses_api.tools.mcp import call_tool

    left = deadline - time.monotonic()
    if left <= 0:
        return mcp_result(item, error="The response's time for tool calls is over.")
    outcome = await call_tool(
        offer.client(),
        name,
        arguments,
        timeout=min(settings.SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS, left),
        max_output_bytes=settings.SWITCHYARD_MCP_OUTPUT_BYTES,
    )
    if outcome.error is not None:
        return mcp_result(item, error=outcome.error)
    if outcome.is_error:
        return mcp_result(item, error=outcome.output or "The tool reported an error.")
    return mcp_result(item, output=outcome.output)


def _continued(request: CreateResponse, made: Sequence[dict[str, Any]]) -> CreateResponse:
    """The request as the backend first got it, with everything the response
    has made so far after its input: the backend's next call reads it all."""
    earlier = (
        _ITEMS.validate_python([{"role": "user", "content": request.input}])
        if isinstance(request.input, str)
        else list(request.input)
    )
    return request.model_copy(update={"input": [*earlier, *_ITEMS.validate_python(made)]})


_ITEMS: TypeAdapter[list[InputItem]] = TypeAdapter(list[InputItem])


async def _write(call: Call, output: Output, events: list[dict[str, Any]]) -> None:
    if events and output.writer is not None:
        await call.responder.chunk(output.writer.encode(events))
