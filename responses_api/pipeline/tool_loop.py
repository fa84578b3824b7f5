"""The tool loop: the hosted tools a request offers, run by the gateway
(each kind plugs in through ``pipeline.hosted.HostedKind``: MCP servers,
web search, file search).

Two stages of ``create_response`` (docs/api/mcp-tools.md, docs/api/web-search.md):

* :func:`hosted_tools`, before the request is translated: the kinds the
  request offers and the organisation runs. Each ``{"type": "mcp"}`` tool
  is resolved to a server (the organisation's registered one wins;
  ``catalogue.mcp_resolve``) and its tools are listed, all servers at
  once, so that the translation offers the allowed ones to the model as
  functions. A server that cannot list its tools fails the request (424),
  as a backend that cannot answer does. A ``web_search`` tool runs where
  the organisation bound a search provider (``pipeline.web_searches``); a
  ``file_search`` tool searches the request's vector stores
  (``pipeline.file_searches``).
* :func:`answer_with_tools`, in place of one relay: the backend answers;
  the hosted calls it made are run (each bounded in time and output), their
  results go to the client as their items (``mcp_call``,
  ``web_search_call``, ``file_search_call``) and back to the model, and the backend is asked
  again, until it answers without calling one of them, or the response's
  bounds end the loop: ``max_tool_calls``, the turns and the deadline of
  the settings.

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
from typing import TYPE_CHECKING, Any

from django.conf import settings
from pydantic import TypeAdapter

from responses_api.access.auth import Caller
from responses_api.catalogue.catalog import mcp_organisation_for
from responses_api.catalogue.mcp_resolve import ResolvedMcpServer, resolve_mcp_tool
from responses_api.pipeline.admission import admit_turn
from responses_api.pipeline.call import Call, Output
from responses_api.pipeline.failover import Attempt
from responses_api.pipeline.hosted import HostedKind, HostedKinds
from responses_api.pipeline.mcp_calls import (
    Hosted,
    Offer,
    answered_approvals,
    approvals_checked,
    tool_needs_approval,
)
from responses_api.pipeline.relay import start
from responses_api.protocol.body import CreateResponse
from responses_api.protocol.errors import ApiError, invalid
from responses_api.protocol.items import InputItem
from responses_api.protocol.tools import HostedChoice, HostedTool
from responses_api.store.seal import approval_id
from responses_api.translate.request import ChatDraft
from responses_api.translate.tool_turns import ListedTool, approval_requested, next_call

if TYPE_CHECKING:
    from responses_api.tools.mcp_sessions import Sessions

Upstream = AbstractAsyncContextManager[Attempt]


async def hosted_tools(caller: Caller, request: CreateResponse) -> HostedKinds | None:
    """The hosted kinds the request offers and the gateway runs for it
    (None when there is none). The caller closes them (``HostedKinds.close``)
    once the response ends."""
    from responses_api.pipeline.file_searches import file_search_kind
    from responses_api.pipeline.web_searches import web_search_kind

    kinds: list[HostedKind] = []
    mcp = await _mcp_servers(caller, request)
    if mcp is not None:
        kinds.append(mcp)
    try:
        search = await web_search_kind(caller, request)
    except BaseException:
        if mcp is not None:
            await mcp.close()
        raise
    if search is not None:
        kinds.append(search)
    files = await file_search_kind(caller, request)
    if files is not None:
        kinds.append(files)
    return HostedKinds(tuple(kinds)) if kinds else None


async def _mcp_servers(caller: Caller, request: CreateResponse) -> Hosted | None:
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
    # The MCP SDK costs half a second to import: only a request that offers
    # an MCP tool pays it, once per process.
    from responses_api.tools.mcp_sessions import Sessions

    # Kept open from the listing through the loop (closed by ``HostedKinds.close``).
    sessions = Sessions(
        settings.SWITCHYARD_MCP_LIST_TIMEOUT_SECONDS + settings.SWITCHYARD_MCP_DEADLINE_SECONDS
    )
    listing = [asyncio.ensure_future(_listed(server, sessions)) for server in servers]
    try:
        listed = await asyncio.gather(*listing)
    except BaseException:
        for task in listing:
            task.cancel()
        await asyncio.wait(listing)
        await sessions.aclose()
        raise
    offers = tuple(Offer(server, tools) for server, tools in zip(servers, listed, strict=True))
    return Hosted(offers, sessions)


async def _listed(server: ResolvedMcpServer, sessions: Sessions) -> tuple[ListedTool, ...]:
    from responses_api.tools.mcp import McpUnavailable, list_tools

    offer = Offer(server, ())
    try:
        tools = await list_tools(
            offer.client(),
            timeout=settings.SWITCHYARD_MCP_LIST_TIMEOUT_SECONDS,
            sessions=sessions,
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
        tool_needs_approval(
            server, ListedTool(tool.name, tool.description, tool.input_schema, tool.read_only)
        )
        for tool in tools
        if server.allows(tool.name, read_only_hint=tool.read_only)
    )


Relay = Callable[[Upstream], Awaitable[None]]
Open = Callable[[ChatDraft], Upstream]
Draft = Callable[[CreateResponse], ChatDraft]


async def answer_with_tools(
    call: Call,
    output: Output,
    hosted: HostedKinds,
    request: CreateResponse,
    *,
    draft: ChatDraft,
    open_upstream: Open,
    relay: Relay,
    translate: Draft,
) -> None:
    """Relay the backend's answers and run the hosted calls they make, until
    one answers without such a call (see the module's docstring)."""
    translator = output.translator
    mcp = hosted.of(Hosted)
    # Before the response starts: a wrong or replayed approval is a 400.
    checked = await approvals_checked(call.exchange, mcp, request) if mcp is not None else []
    if output.writer is not None and not call.responder.started:
        # Started before the first item, which its snapshot must not hold yet.
        await start(call.responder, output.writer, translator)
    for kind in hosted.kinds:
        await _write(call, output, kind.opening(translator))
    deadline = time.monotonic() + settings.SWITCHYARD_MCP_DEADLINE_SECONDS
    caller = call.exchange.caller
    assert caller is not None
    organisation_id = caller.organisation_id
    approved = (
        await answered_approvals(call.exchange, mcp, checked, translator, deadline)
        if checked
        else []
    )
    if approved:
        await _write(call, output, approved)
        draft = translate(_continued(request, translator.output()))
    budget = request.max_tool_calls
    made = 0
    announced: set[int] = set()
    for turn in range(settings.SWITCHYARD_MCP_MAX_TURNS):
        if turn:
            # Admission held the first call's worst case; each next one holds its own.
            await admit_turn(exchange=call.exchange, draft=draft)
        await relay(open_upstream(draft))
        if translator.finish_reason == "length" or translator.output_cap.reached:
            return  # cut short: the ending says incomplete
        await _write(call, output, translator.close_items())
        # Calls that wait for the client's approval end the response, once
        # the calls that need none have run: the next request answers them.
        asking = [
            item
            for item in translator.items
            if item.kind == "mcp_approval_request" and item.output_index not in announced
        ]
        for item in asking:
            assert item.done_item is not None and item.ref is not None
            announced.add(item.output_index)
            sealed = approval_id(
                organisation_id,
                item.ref.namespace or "",
                item.ref.name,
                item.done_item["arguments"],
            )
            await _write(call, output, approval_requested(item, sealed))
        waiting = hosted.waiting(translator)
        if not waiting:
            return
        if turn + 1 == settings.SWITCHYARD_MCP_MAX_TURNS and not asking:
            # A call left waiting at the last turn ends with the response.
            for kind, item in waiting:
                await _write(call, output, kind.refuse(item, _LAST_TURN))
            return
        events = []
        for kind, item in waiting:
            if budget is not None and made >= budget:
                events += kind.refuse(item, f"max_tool_calls ({budget}) was reached.")
                continue
            made += 1
            events += await kind.run(call.exchange, translator, item, deadline)
        await _write(call, output, events)
        if asking:
            return
        next_call(translator)
        draft = translate(_continued(request, translator.output()))


_LAST_TURN = "The response made as many backend calls as it may (SWITCHYARD_MCP_MAX_TURNS)."


def _continued(request: CreateResponse, made: Sequence[dict[str, Any]]) -> CreateResponse:
    """The request as the backend first got it, with everything the response
    has made so far after its input: the backend's next call reads it all."""
    earlier = (
        _ITEMS.validate_python([{"role": "user", "content": request.input}])
        if isinstance(request.input, str)
        else list(request.input)
    )
    update: dict[str, Any] = {"input": [*earlier, *_ITEMS.validate_python(made)]}
    if isinstance(request.tool_choice, HostedChoice):
        # A hosted tool the client chose is called once: then the model answers.
        update["tool_choice"] = "auto"
    return request.model_copy(update=update)


_ITEMS: TypeAdapter[list[InputItem]] = TypeAdapter(list[InputItem])


async def _write(call: Call, output: Output, events: list[dict[str, Any]]) -> None:
    if events and output.writer is not None:
        await call.responder.chunk(output.writer.encode(events))
