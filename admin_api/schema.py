"""What drf-spectacular needs to describe the management API truthfully:
the admin-key security scheme, the constant ``object`` fields, and the
error envelope on every operation (each can answer 400, 401, 403, 404, 405
or 429)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)

import responses_api.protocol.errors


def openapi_30(schema: Any) -> Any:
    """``schema`` (JSON Schema, as OpenAPI 3.1 takes it) as OpenAPI 3.0 takes
    it, the version drf-spectacular writes: a type that may be null is
    ``nullable``, and ``examples`` (not a 3.0 keyword) is left out."""
    if isinstance(schema, list):
        return [openapi_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted: dict[str, Any] = {}
    for name, value in schema.items():
        if name == "examples":
            continue
        if name == "type" and isinstance(value, list) and "null" in value:
            (value,) = (t for t in value if t != "null")
            converted["type"] = value
            converted["nullable"] = True
        elif name == "properties":
            converted[name] = {prop: openapi_30(sub) for prop, sub in value.items()}
        else:
            converted[name] = openapi_30(value)
    return converted


ERROR_SCHEMA = openapi_30(responses_api.protocol.errors.ERROR_SCHEMA)
ERRORS = {
    "400": "Invalid request: `param` names the field.",
    "401": "No admin key, or not a valid one.",
    "403": "The key's role may not do this.",
    "404": "No such object in this organisation.",
    "405": "Method not allowed.",
    "415": "The body is not JSON.",
    "429": "Too many requests with this key (see Retry-After).",
}


class AdminKeyScheme(OpenApiAuthenticationExtension):
    target_class = "admin_api.auth.AdminKeyAuthentication"
    name = "adminKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An admin API key, sy_admin_…",
        }


class ObjectTypeFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "admin_api.serializers.base.ObjectTypeField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {"type": "string", "enum": [self.target.value], "readOnly": True}


def add_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """Postprocessing hook: the error envelope as a component, and as every
    operation's error responses."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    ref = {"$ref": "#/components/schemas/Error"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for code, description in ERRORS.items():
                responses.setdefault(
                    code,
                    {"description": description, "content": {"application/json": {"schema": ref}}},
                )
    return result
