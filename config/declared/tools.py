"""The tools the gateway runs for a request: remote MCP servers, web search."""

from __future__ import annotations

from config.declared.spec import UPSTREAM, Setting

TITLE = "Hosted tools"

SETTINGS = (
    Setting(
        "SWITCHYARD_MCP_LIST_TIMEOUT_SECONDS",
        "float",
        10.0,
        "Seconds an MCP server has to list its tools (connect, handshake and listing); past "
        "them the request fails with a 424 naming the server.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_MCP_CALL_TIMEOUT_SECONDS",
        "float",
        60.0,
        "Seconds one MCP tool call may take; past them the call fails and the model is told so.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_MCP_DEADLINE_SECONDS",
        "float",
        600.0,
        "Seconds the tool calls of one response may take in all; past them no call is made and "
        "the model answers with what it has.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_MCP_OUTPUT_BYTES",
        "int",
        256 * 1024,
        "The most of one MCP tool call's output the model is given, in bytes of text; the rest "
        "is cut, saying so.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_MCP_MAX_TURNS",
        "int",
        16,
        "Backend calls one response may make while it runs MCP tools (a model that keeps "
        "calling tools ends there, with what it answered).",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_WEB_SEARCH_TIMEOUT_SECONDS",
        "float",
        20.0,
        "Seconds one web search may take at the bound provider (an API or an MCP server's "
        "tool); past them the search fails and the model is told so.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_WEB_SEARCH_OUTPUT_BYTES",
        "int",
        1024 * 1024,
        "The most a search provider's answer may hold, in bytes; a larger answer fails the "
        "search and the model is told so.",
        UPSTREAM,
    ),
    Setting(
        "SWITCHYARD_WEB_PAGE_BYTES",
        "int",
        2 * 1024 * 1024,
        "The most a web page the model opens (web search's open_page and find_in_page) may "
        "hold, in bytes as sent; a larger page fails the call and the model is told so. A "
        "compressed page is refused, so this also bounds the text decoded.",
        UPSTREAM,
    ),
)
