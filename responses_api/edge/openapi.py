"""The OpenAPI 3.1 description of the public API, built at runtime.

Its paths are those of the route table the consumer dispatches on
(:data:`routes.ROUTES`), each described beside its handler there, so the
document lists exactly what is served.

The request body of ``POST /responses`` is the JSON Schema of
:class:`protocol.CreateResponse`, the very model the API validates with, so the
document cannot drift from the validation. Responses have no pydantic model
(``translate/`` builds them as dicts); they are described here by hand, only
as far as clients rely on them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Any

from responses_api.api.conversations import MetadataUpdate, NewConversation, NewItems
from responses_api.api.files import FILE_SCHEMAS
from responses_api.api.vector_store_routes import VECTOR_STORE_SCHEMAS
from responses_api.edge.openapi_items import ITEM_SCHEMAS, OUTPUT_ITEM
from responses_api.edge.routes import PREFIXES, ROUTES, Operation, Schema
from responses_api.protocol.body import REFUSAL_MESSAGES, CreateResponse
from responses_api.protocol.compact import CompactRequest, CountRequest
from responses_api.protocol.embeddings import embedding_schemas
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
            "description": "Output items: message, reasoning, function and tool calls, "
            "and the items of the hosted tools the gateway runs.",
            "items": OUTPUT_ITEM,
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
    400: "Invalid request: malformed JSON, an unknown or refused parameter, a bad value.",
    401: "Missing, unknown, revoked or expired API key.",
    403: "The key may not use this model.",
    404: "Unknown model, route or response id.",
    405: "Method not allowed on this path.",
    413: "The request body is too large.",
    415: "The body is not JSON.",
    429: "Rate limited; see Retry-After.",
    502: "The backend answered badly.",
    503: "No backend can serve now, or this server is shutting down; see Retry-After.",
    504: "The backend timed out.",
}
ERROR_CONTENT = {"application/json": "Error"}


def _schema(schema: Schema) -> Any:
    return _ref(schema) if isinstance(schema, str) else schema


def _answer(description: str, content: Mapping[str, Schema]) -> dict[str, Any]:
    return {
        "description": description,
        "headers": REQUEST_ID,
        "content": {media: {"schema": _schema(schema)} for media, schema in content.items()},
    }


def _operation(operation: Operation) -> dict[str, Any]:
    described: dict[str, Any] = {
        "operationId": operation.operation_id,
        "summary": operation.summary,
    }
    if operation.description:
        described["description"] = operation.description
    if operation.request:
        described["requestBody"] = {
            "required": True,
            "content": {operation.request_media: {"schema": _ref(operation.request)}},
        }
    errors = {str(code): _answer(ERRORS[code], ERROR_CONTENT) for code in operation.errors}
    described["responses"] = {"200": _answer(operation.answer, operation.content), **errors}
    described.update(operation.extensions)
    return described


def _paths() -> dict[str, Any]:
    """The routes' described operations. A route with none (a path of
    OpenAI's API refused here) is left out: clients should not call it."""
    paths: dict[str, Any] = {}
    for route in ROUTES:
        described = {
            method.lower(): _operation(operation) for method, operation in route.described().items()
        }
        if not described:
            continue
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in route.parameters()
        ]
        paths[route.path] = {"parameters": parameters, **described} if parameters else described
    return paths


def _request_schemas() -> dict[str, Any]:
    schema = copy.deepcopy(CreateResponse.model_json_schema(ref_template=REF))
    definitions = schema.pop("$defs", {})
    # Parameters the model parses only to refuse them: the document
    # states which values are accepted, so clients and fuzzers know.
    accepted: dict[str, dict[str, object]] = {
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
        "unknown fields are refused. docs/api/responses.md says what each field does here."
    )
    return {"CreateResponse": schema, **definitions}


COMPACTION_ITEM = {
    "type": "object",
    "required": ["id", "type", "encrypted_content"],
    "properties": {
        "id": {"type": "string"},
        "type": {"const": "compaction"},
        "encrypted_content": {
            "type": "string",
            "description": "The summary, sealed for this organisation and model (`sy1.…`).",
        },
    },
}
COMPACTED_RESPONSE = {
    "type": "object",
    "required": ["id", "object", "created_at", "output", "usage"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "response.compaction"},
        "created_at": {"type": "integer"},
        "output": {
            "type": "array",
            "description": "The conversation's user messages, then one compaction item.",
            "items": {"anyOf": [{"type": "object"}, _ref("CompactionItem")]},
        },
        "usage": _ref("Usage"),
        "switchyard": _ref("SwitchyardExtras"),
    },
}
INPUT_TOKENS = {
    "type": "object",
    "required": ["object", "input_tokens"],
    "properties": {
        "object": {"const": "response.input_tokens"},
        "input_tokens": {"type": "integer"},
    },
}


def _compaction_schemas() -> dict[str, Any]:
    """The compaction and token-count bodies, from the models they validate with."""
    schemas: dict[str, Any] = {
        "CompactionItem": COMPACTION_ITEM,
        "CompactedResponse": COMPACTED_RESPONSE,
        "InputTokens": INPUT_TOKENS,
    }
    for name, model in (("CompactResponse", CompactRequest), ("CountInputTokens", CountRequest)):
        schema = copy.deepcopy(model.model_json_schema(ref_template=REF))
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
    return schemas


CONVERSATION = {
    "type": "object",
    "required": ["id", "object", "created_at", "metadata"],
    "properties": {
        "id": {"type": "string", "examples": ["conv_0123456789abcdef0123456789abcdef"]},
        "object": {"const": "conversation"},
        "created_at": {"type": "integer", "description": "Unix seconds."},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
CONVERSATION_DELETED = {
    "type": "object",
    "required": ["id", "object", "deleted"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "conversation.deleted"},
        "deleted": {"const": True},
    },
}
ITEM_LIST = {
    "type": "object",
    "required": ["object", "data", "first_id", "last_id", "has_more"],
    "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": {"type": "object"}},
        "first_id": {"type": ["string", "null"]},
        "last_id": {"type": ["string", "null"]},
        "has_more": {"type": "boolean"},
    },
}


def _conversation_schemas() -> dict[str, Any]:
    """The Conversations API's bodies, from the models it validates with."""
    schemas: dict[str, Any] = {
        "Conversation": CONVERSATION,
        "ConversationDeleted": CONVERSATION_DELETED,
        "ConversationItemList": ITEM_LIST,
    }
    for model in (NewConversation, NewItems, MetadataUpdate):
        schema = copy.deepcopy(model.model_json_schema(ref_template=REF))
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


@cache
def openapi_schema() -> dict[str, Any]:
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
        "servers": [{"url": prefix} for prefix in PREFIXES],
        "security": [{"bearerAuth": []}, {"apiKeyHeader": []}],
        "paths": _paths(),
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
                **_conversation_schemas(),
                **_compaction_schemas(),
                **embedding_schemas(REF),
                **FILE_SCHEMAS,
                **VECTOR_STORE_SCHEMAS,
                "Response": RESPONSE,
                "Usage": USAGE,
                "SwitchyardExtras": SWITCHYARD_EXTRAS,
                "StreamEvent": STREAM_EVENT,
                "ModelList": MODEL_LIST,
                "Error": ERROR_SCHEMA,
                **ITEM_SCHEMAS,
            },
        },
    }
