"""The OpenAPI 3.1 description of the public API, built at runtime.

The request body of ``POST /responses`` is the JSON Schema of
:class:`protocol.CreateResponse`, the very model the API validates with, so the
document cannot drift from the validation. Responses have no pydantic model
(``translate/`` builds them as dicts); they are described here by hand, only
as far as clients rely on them.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from responses_api.protocol.body import REFUSAL_MESSAGES, CreateResponse
from responses_api.protocol.errors import ERROR_SCHEMA

REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


USAGE = {
    "type": "object",
    "required": ["input_tokens", "output_tokens", "total_tokens"],
    "properties": {
        "input_tokens": {"type": "integer"},
        "input_tokens_details": {
            "type": "object",
            "properties": {"cached_tokens": {"type": "integer"}},
        },
        "output_tokens": {"type": "integer"},
        "output_tokens_details": {
            "type": "object",
            "properties": {"reasoning_tokens": {"type": "integer"}},
        },
        "total_tokens": {"type": "integer"},
    },
}

SWITCHYARD_EXTRAS = {
    "type": "object",
    "description": "Which backend ran the request, its timings and notices.",
    "properties": {
        "request_id": {"type": "string", "format": "uuid"},
        "backend": {
            "type": ["object", "null"],
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "version": {"type": "string"},
            },
        },
        "timing": {
            "type": "object",
            "properties": {
                name: {"type": ["number", "null"]}
                for name in ("queue_wait_ms", "ttft_ms", "duration_ms", "tokens_per_second")
            },
        },
        "notices": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}

RESPONSE = {
    "type": "object",
    "description": "A response, as OpenAI's Responses API returns it.",
    "required": ["id", "object", "created_at", "status", "model", "output"],
    "properties": {
        "id": {"type": "string", "examples": ["resp_0123456789abcdef"]},
        "object": {"const": "response"},
        "created_at": {"type": "integer"},
        "status": {"enum": ["completed", "incomplete", "failed", "in_progress"]},
        "model": {"type": "string"},
        "output": {
            "type": "array",
            "description": "Output items: message, reasoning, function_call, custom_tool_call.",
            "items": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string"}, "id": {"type": "string"}},
            },
        },
        "output_text": {"type": "string"},
        "error": {"type": ["object", "null"]},
        "incomplete_details": {"type": ["object", "null"]},
        "usage": {"anyOf": [_ref("Usage"), {"type": "null"}]},
        "switchyard": _ref("SwitchyardExtras"),
    },
}

STREAM_EVENT = {
    "type": "object",
    "description": (
        "One Server-Sent Event: `event` repeats the JSON's `type`; `sequence_number` "
        "counts from 0. The last event is `response.completed`, `response.incomplete` "
        "or `response.failed`, carrying the whole response with its usage."
    ),
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "pattern": "^response\\."},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "required": ["type", "sequence_number"],
                "properties": {
                    "type": {"type": "string"},
                    "sequence_number": {"type": "integer", "minimum": 0},
                    "response": _ref("Response"),
                },
            },
        },
    },
}

MODEL_LIST = {
    "type": "object",
    "required": ["object", "data"],
    "properties": {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "object", "created", "owned_by"],
                "properties": {
                    "id": {"type": "string"},
                    "object": {"const": "model"},
                    "created": {"type": "integer"},
                    "owned_by": {"type": "string"},
                },
            },
        },
    },
}

REQUEST_ID = {
    "X-Request-Id": {
        "description": "The request's id, also in the usage log and the console's trace.",
        "schema": {"type": "string", "format": "uuid"},
    }
}

ERRORS = {
    "400": "Invalid request: malformed JSON, an unknown or refused parameter, a bad value.",
    "401": "Missing, unknown, revoked or expired API key.",
    "403": "The key may not use this model.",
    "404": "Unknown model, route or response id.",
    "405": "Method not allowed on this path.",
    "413": "The request body is too large.",
    "415": "The body is not JSON.",
    "429": "Rate limited; see Retry-After.",
    "502": "The backend answered badly.",
    "503": "No backend can serve now, or this server is shutting down; see Retry-After.",
    "504": "The backend timed out.",
}


def _error_responses(*codes: str) -> dict[str, Any]:
    return {
        code: {
            "description": ERRORS[code],
            "headers": REQUEST_ID,
            "content": {"application/json": {"schema": _ref("Error")}},
        }
        for code in codes
    }


def _request_schemas() -> dict[str, Any]:
    schema = copy.deepcopy(CreateResponse.model_json_schema(ref_template=REF))
    definitions = schema.pop("$defs", {})
    # Parameters the model parses only to refuse them: the document
    # states which values are accepted, so clients and fuzzers know.
    accepted: dict[str, dict[str, object]] = {
        "background": {"enum": [False, None]},
        "top_logprobs": {"enum": [0, None]},
        "truncation": {"enum": ["disabled", None]},
    }
    for name, message in REFUSAL_MESSAGES.items():
        schema["properties"][name] = {
            **accepted.get(name, {"type": "null"}),
            "default": None,
            "description": message,
        }
    schema["description"] = (
        "Create a response. Fields are those of OpenAI's Responses API; "
        "unknown fields are refused. See the README for what each field does here."
    )
    return {"CreateResponse": schema, **definitions}


@cache
def openapi_schema() -> dict[str, Any]:
    response_id = {
        "name": "response_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
    }
    stored = "Only for organisations whose retention policy stores responses; otherwise 404."
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchyard Responses API",
            "version": "1",
            "description": (
                "The OpenAI Responses API, served on your own inference backends. "
                "Use any OpenAI SDK with `base_url` set to this server's `/v1` "
                "(or `/api/v1`) and a Switchyard API key."
            ),
        },
        "servers": [{"url": "/api/v1"}, {"url": "/v1"}],
        "security": [{"bearerAuth": []}, {"apiKeyHeader": []}],
        "paths": {
            "/responses": {
                "post": {
                    "operationId": "createResponse",
                    "summary": "Create a response (JSON, or Server-Sent Events with stream: true)",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("CreateResponse")}},
                    },
                    "responses": {
                        "200": {
                            "description": (
                                "The response; with `stream: true` an event stream of "
                                "`response.*` events ending in `response.completed`, "
                                "`response.incomplete` or `response.failed`."
                            ),
                            "headers": REQUEST_ID,
                            "content": {
                                "application/json": {"schema": _ref("Response")},
                                # OpenAPI 3.1: for an event stream, the schema of one event.
                                "text/event-stream": {"schema": _ref("StreamEvent")},
                            },
                        },
                        **_error_responses(
                            "400", "401", "403", "404", "413", "415", "429", "502", "503", "504"
                        ),
                    },
                }
            },
            "/models": {
                "get": {
                    "operationId": "listModels",
                    "summary": "The organisation's models that have a backend",
                    "responses": {
                        "200": {
                            "description": "The models, in OpenAI's list format.",
                            "headers": REQUEST_ID,
                            "content": {"application/json": {"schema": _ref("ModelList")}},
                        },
                        **_error_responses("401"),
                    },
                }
            },
            "/responses/{response_id}": {
                "parameters": [response_id],
                "get": {
                    "operationId": "getResponse",
                    "summary": "Retrieve a stored response",
                    "description": stored,
                    "responses": {
                        "200": {
                            "description": "The stored response.",
                            "headers": REQUEST_ID,
                            "content": {"application/json": {"schema": _ref("Response")}},
                        },
                        **_error_responses("401", "404"),
                    },
                },
                "delete": {
                    "operationId": "deleteResponse",
                    "summary": "Delete a stored response",
                    "description": stored,
                    "responses": {
                        "200": {
                            "description": "Deleted.",
                            "headers": REQUEST_ID,
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        **_error_responses("401", "404"),
                    },
                },
            },
            "/responses/{response_id}/input_items": {
                "parameters": [response_id],
                "get": {
                    "operationId": "listInputItems",
                    "summary": "The input items of a stored response",
                    "description": stored,
                    "responses": {
                        "200": {
                            "description": "The input items, in OpenAI's list format.",
                            "headers": REQUEST_ID,
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        **_error_responses("401", "404"),
                    },
                },
            },
        },
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A Switchyard API key (`sy_sk_…`).",
                },
                "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
            "schemas": {
                **_request_schemas(),
                "Response": RESPONSE,
                "Usage": USAGE,
                "SwitchyardExtras": SWITCHYARD_EXTRAS,
                "StreamEvent": STREAM_EVENT,
                "ModelList": MODEL_LIST,
                "Error": ERROR_SCHEMA,
            },
        },
    }
