"""What an MCP server's label, URL, headers and tool names may be: the checks
that registering a server (``services.mcp_servers``) and resolving a
request's ``mcp`` tool (``mcp_resolve``) share, so that the same value gets
the same answer in both places. Sans-I/O except :func:`server_url_error`
with ``allow_private`` given, which looks the host name up."""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from responses_api.catalogue.addresses import backend_policy, numeric_host, save_refusal

# OpenAI's rule for ``server_label``: a letter, then letters, digits, _ or -.
LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
LABEL_MESSAGE = (
    "A label starts with a letter and has at most 64 letters, digits, underscores or hyphens."
)
URL_MAX = 500
# An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}")
HEADERS_MAX = 32
HEADER_VALUE_MAX = 4000
# Set by the client for each connection, or given as ``authorization``.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "authorization"}
)
TOOL_NAME_MAX = 128
TOOLS_MAX = 500
SUBJECT = "MCP server"


def label_error(value: object) -> str | None:
    if isinstance(value, str) and LABEL.fullmatch(value):
        return None
    return LABEL_MESSAGE


def server_url_error(url: object, *, allow_private: bool | None) -> str | None:
    """Why ``url`` cannot be an MCP server's URL, or None. With
    ``allow_private`` None the address is not judged; else by the backend
    address policy (``catalogue.addresses``) of a server with that flag,
    which looks a host name up: never on a request's path."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return "Use an http:// or https:// URL."
    if len(url) > URL_MAX:
        return f"At most {URL_MAX} characters."
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "Enter a valid URL."
    if not parts.hostname or any(c.isspace() or ord(c) < 32 for c in url):
        return "Enter a valid URL."
    if "#" in url:
        return "An MCP server's URL has no fragment (#…)."
    if "@" in parts.netloc:
        return "An MCP server's URL has no user name or password; give the authorization instead."
    if numeric_host(parts.hostname):
        return "Write an IPv4 address as four decimal numbers (a.b.c.d)."
    if allow_private is None:
        return None
    default_port = 443 if parts.scheme == "https" else 80
    refusal = save_refusal(
        parts.hostname,
        port or default_port,
        backend_policy(allow_private=allow_private),
        subject=SUBJECT,
    )
    if refusal:
        return f"{refusal} Only platform staff may allow an MCP server on such an address."
    return None


def headers_error(value: object) -> str | None:
    """Why ``value`` cannot be a server's headers (a JSON object of text), or None."""
    if not isinstance(value, Mapping):
        return "A JSON object of header names and values."
    if len(value) > HEADERS_MAX:
        return f"At most {HEADERS_MAX} headers."
    for name, text in value.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            return "A header name is letters, digits and !#$%&'*+-.^_`|~ only."
        if name.lower() in RESERVED_HEADERS:
            return f"The header {name} cannot be set here."
        if not isinstance(text, str) or len(text) > HEADER_VALUE_MAX:
            return f"The value of {name} is text of at most {HEADER_VALUE_MAX} characters."
        if any(ord(c) < 32 and c != "\t" for c in text):
            return f"The value of {name} has a line break or a control character."
    return None


def tool_names_error(value: object) -> str | None:
    """Why ``value`` cannot be a list of tool names, or None."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        return "A list of tool names."
    if len(value) > TOOLS_MAX:
        return f"At most {TOOLS_MAX} tool names."
    for name in value:
        if not isinstance(name, str) or not name.strip() or len(name) > TOOL_NAME_MAX:
            return f"Each tool name is text of 1 to {TOOL_NAME_MAX} characters."
    return None


def tool_names(value: list[str] | tuple[str, ...]) -> list[str]:
    """The names without spaces around them, each once, in the order given."""
    return list(dict.fromkeys(name.strip() for name in value))
