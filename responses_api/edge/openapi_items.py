"""The shapes of the output items of hosted tools the gateway runs, for the
OpenAPI document (``edge.openapi``): ``web_search_call`` with the
``url_citation`` annotations its answer gets (docs/api/web-search.md),
``file_search_call`` with ``file_citation`` (docs/api/file-search.md), and
the MCP items (docs/api/mcp-tools.md), as OpenAI's types define them."""

from __future__ import annotations

from typing import Any

REF = "#/components/schemas/{model}"

_STRING = {"type": "string"}
_NULLABLE = {"type": ["string", "null"]}


def _coded_error(kind: str, description: str) -> dict[str, Any]:
    """A failed MCP call's error object that carries a code and a message."""
    return {
        "type": "object",
        "description": description,
        "required": ["type", "code", "message"],
        "properties": {
            "type": {"const": kind},
            "code": {"type": "integer"},
            "message": _STRING,
        },
    }


ITEM_SCHEMAS: dict[str, Any] = {
    "WebSearchCall": {
        "type": "object",
        "description": "A web search the gateway ran on the organisation's provider, or a page "
        "it read for the model.",
        "required": ["id", "type", "status", "action"],
        "properties": {
            "id": {"type": "string", "pattern": "^ws_"},
            "type": {"const": "web_search_call"},
            "status": {"enum": ["in_progress", "searching", "completed", "failed", "incomplete"]},
            "action": {
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": {"enum": ["search", "open_page", "find_in_page"]},
                    "query": {**_STRING, "description": "The search's query (search)."},
                    "url": {**_STRING, "description": "The page read (open_page, find_in_page)."},
                    "pattern": {**_STRING, "description": "The text looked for (find_in_page)."},
                    "sources": {
                        "type": "array",
                        "description": "Only with include: ['web_search_call.action.sources'].",
                        "items": {
                            "type": "object",
                            "required": ["type", "url"],
                            "properties": {"type": {"const": "url"}, "url": _STRING},
                        },
                    },
                },
            },
        },
    },
    "UrlCitation": {
        "type": "object",
        "description": "An answer's citation of a search result, on its output_text.",
        "required": ["type", "start_index", "end_index", "url", "title"],
        "properties": {
            "type": {"const": "url_citation"},
            "start_index": {"type": "integer", "minimum": 0},
            "end_index": {"type": "integer", "minimum": 0},
            "url": _STRING,
            "title": _STRING,
        },
    },
    "FileSearchCall": {
        "type": "object",
        "description": "A search of the request's vector stores, run by the gateway.",
        "required": ["id", "type", "status", "queries"],
        "properties": {
            "id": {"type": "string", "pattern": "^fs_"},
            "type": {"const": "file_search_call"},
            "status": {"enum": ["in_progress", "searching", "completed", "failed", "incomplete"]},
            "queries": {"type": "array", "items": _STRING},
            "results": {
                "type": ["array", "null"],
                "description": "Only with include: ['file_search_call.results'].",
                "items": {
                    "type": "object",
                    "properties": {
                        "file_id": _STRING,
                        "filename": _STRING,
                        "score": {"type": "number", "minimum": 0, "maximum": 1},
                        "attributes": {"type": "object"},
                        "text": _STRING,
                    },
                },
            },
        },
    },
    "FileCitation": {
        "type": "object",
        "description": "An answer's citation of a file a file search found, on its output_text.",
        "required": ["type", "file_id", "filename", "index"],
        "properties": {
            "type": {"const": "file_citation"},
            "file_id": _STRING,
            "filename": _STRING,
            "index": {"type": "integer", "minimum": 0},
        },
    },
    "McpListTools": {
        "type": "object",
        "required": ["id", "type", "server_label", "tools"],
        "properties": {
            "id": _STRING,
            "type": {"const": "mcp_list_tools"},
            "server_label": _STRING,
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "input_schema"],
                    "properties": {
                        "name": _STRING,
                        "description": _NULLABLE,
                        "input_schema": {"type": "object"},
                        "annotations": {"type": ["object", "null"]},
                    },
                },
            },
            "error": _NULLABLE,
        },
    },
    "McpCall": {
        "type": "object",
        "required": ["id", "type", "server_label", "name", "arguments"],
        "properties": {
            "id": _STRING,
            "type": {"const": "mcp_call"},
            "status": {"enum": ["in_progress", "calling", "completed", "failed", "incomplete"]},
            "server_label": _STRING,
            "name": _STRING,
            "arguments": _STRING,
            "output": _NULLABLE,
            "error": {
                "description": (
                    "Why the call failed. As input, a string (an older response's) is accepted too."
                ),
                "oneOf": [
                    {"type": "null"},
                    _coded_error(
                        "mcp_protocol_error", "A JSON-RPC failure, or a call the gateway refused."
                    ),
                    {
                        "type": "object",
                        "description": "The tool ran and reported an error (isError).",
                        "required": ["type", "content"],
                        "properties": {
                            "type": {"const": "mcp_tool_execution_error"},
                            "content": {
                                "description": "The tool's content blocks.",
                                "type": "array",
                                "items": {"type": "object"},
                            },
                        },
                    },
                    _coded_error(
                        "http_error", "The MCP server answered with an HTTP error status."
                    ),
                ],
            },
            "approval_request_id": _NULLABLE,
        },
    },
    "McpApprovalRequest": {
        "type": "object",
        "required": ["id", "type", "server_label", "name", "arguments"],
        "properties": {
            "id": _STRING,
            "type": {"const": "mcp_approval_request"},
            "server_label": _STRING,
            "name": _STRING,
            "arguments": _STRING,
        },
    },
}

_ANNOTATIONS = frozenset({"UrlCitation", "FileCitation"})

OUTPUT_ITEM = {
    "anyOf": [
        *({"$ref": REF.format(model=name)} for name in ITEM_SCHEMAS if name not in _ANNOTATIONS),
        {
            "type": "object",
            "description": "message, reasoning, function_call, custom_tool_call, …",
            "required": ["type"],
            "properties": {"type": {"type": "string"}, "id": {"type": "string"}},
        },
    ]
}
