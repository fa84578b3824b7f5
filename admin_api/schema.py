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

ERROR_SCHEMA = {
    "type": "object",
    "description": "The OpenAI error envelope, used by every error response.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": "string", "nullable": True},
                "code": {"type": "string", "nullable": True},
            },
        }
    },
}
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
